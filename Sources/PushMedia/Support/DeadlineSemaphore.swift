import Foundation

/// A weighted semaphore whose waiters queue in arrival order and give up at a deadline.
///
/// At most `limit` units are held at once. A request that does not fit waits behind those that
/// came before it: nobody overtakes the head of the queue, even one that would fit. Weights are
/// clamped to `1...limit`, so a request larger than the whole limit runs alone. At most
/// `queueLimit` requests hold a place in the queue; past that `reserve` refuses at once.
///
/// `JobGate` (jobs, weight 1) and `DecodeBudget` (bytes) are built on it.
public final class DeadlineSemaphore: Sendable {
    /// What `reserve` decided.
    public enum Admission: Sendable, Equatable {
        /// The units are held; `release` them when done.
        case acquired
        /// A queue place is held: `wait` before running.
        case queued
        /// The queue is full.
        case refused
    }

    private typealias Continuation = CheckedContinuation<Bool, Never>

    private struct Waiter {
        var id: UInt64
        var weight: Int64
        var continuation: Continuation
    }

    private struct State {
        var used: Int64 = 0
        /// Queue places held: requests told `.queued` that were neither admitted nor expired yet.
        var queued = 0
        /// The queued requests already waiting, oldest first.
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        /// Those waiting in `idle` for a moment when nobody is queued and a unit is free.
        var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]

        func isIdle(limit: Int64) -> Bool { queued == 0 && used < limit }

        /// The idle waiters to resume (after unlocking) when the semaphore is idle now.
        mutating func wakeIdle(limit: Int64) -> [CheckedContinuation<Void, Never>] {
            guard isIdle(limit: limit), !idleWaiters.isEmpty else { return [] }
            defer { idleWaiters = [:] }
            return Array(idleWaiters.values)
        }

        /// Admits the waiters that now fit, in order, and returns them to resume (after unlocking).
        mutating func admitWaiters(limit: Int64) -> [Continuation] {
            var admitted: [Continuation] = []
            while let first = waiters.first, used + first.weight <= limit {
                used += first.weight
                queued -= 1
                admitted.append(waiters.removeFirst().continuation)
            }
            return admitted
        }
    }

    /// Units that may be held at once.
    public let limit: Int64
    /// Requests that may wait at once.
    public let queueLimit: Int
    /// What deadlines are read against.
    let clock: DeadlineClock
    private let state = Locked(State())

    public init(limit: Int64, queueLimit: Int = .max, clock: DeadlineClock = .continuous) {
        self.limit = max(1, limit)
        self.queueLimit = max(0, queueLimit)
        self.clock = clock
    }

    /// Units held now.
    public var used: Int64 { state.withLock { $0.used } }
    /// Queue places held now.
    public var queued: Int { state.withLock { $0.queued } }
    /// Requests waiting in the queue now: in `wait`, in their place in the arrival order.
    var waiting: Int { state.withLock { $0.waiters.count } }
    /// Those waiting in `idle` now.
    var idleWaiting: Int { state.withLock { $0.idleWaiters.count } }

    /// `weight` as it is counted: at least 1, at most `limit`.
    public func clamped(_ weight: Int64) -> Int64 { min(max(weight, 1), limit) }

    /// Takes `weight` units when they fit and nobody is queued, else a queue place when one is
    /// free, else neither — without waiting.
    public func reserve(_ weight: Int64 = 1) -> Admission {
        let weight = clamped(weight)
        return state.withLock { state in
            if state.queued == 0 && state.used + weight <= limit {
                state.used += weight
                return .acquired
            }
            if state.queued < queueLimit {
                state.queued += 1
                return .queued
            }
            return .refused
        }
    }

    /// For a `.queued` reservation: waits in arrival order until `weight` units fit, or until
    /// `deadline`. Returns whether the units are held; the queue place is given back either way.
    public func wait(for weight: Int64 = 1, until deadline: ContinuousClock.Instant) async -> Bool {
        let weight = clamped(weight)
        let id: UInt64 = state.withLock {
            $0.nextID += 1
            return $0.nextID
        }
        let timer = Task { [clock] in
            try? await clock.sleep(until: deadline)
            self.expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let (admitted, idle) = state.withLock { state -> (Bool?, [CheckedContinuation<Void, Never>]) in
                if state.waiters.isEmpty && state.used + weight <= limit {
                    state.used += weight
                    state.queued -= 1
                    return (true, state.wakeIdle(limit: limit))
                }
                if clock.now >= deadline {
                    state.queued -= 1
                    return (false, state.wakeIdle(limit: limit))
                }
                state.waiters.append(Waiter(id: id, weight: weight, continuation: continuation))
                return (nil, [])
            }
            for waiter in idle { waiter.resume() }
            if let admitted { continuation.resume(returning: admitted) }
        }
    }

    /// Takes `weight` units, waiting in the queue until `deadline` if they do not fit at once.
    /// Returns the units held (`clamped(weight)`), to `release` later, or nil when the deadline
    /// passed first or the queue was full.
    public func acquire(_ weight: Int64 = 1, until deadline: ContinuousClock.Instant) async -> Int64? {
        let weight = clamped(weight)
        switch reserve(weight) {
        case .acquired: return weight
        case .refused: return nil
        case .queued: return await wait(for: weight, until: deadline) ? weight : nil
        }
    }

    /// Gives `weight` units back (clamped as when they were taken) and admits the waiters that
    /// now fit, in order.
    public func release(_ weight: Int64 = 1) {
        let weight = clamped(weight)
        let (admitted, idle) = state.withLock { state in
            state.used -= weight
            return (state.admitWaiters(limit: limit), state.wakeIdle(limit: limit))
        }
        for continuation in admitted { continuation.resume(returning: true) }
        for continuation in idle { continuation.resume() }
    }

    /// Returns once nobody is queued and a unit is free (at once when that is so now), or when
    /// the task is cancelled: for work that should run only when no request waits (it does not
    /// take the unit: `reserve` still decides).
    public func idle() async {
        let id: UInt64 = state.withLock {
            $0.nextID += 1
            return $0.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    if state.isIdle(limit: limit) || Task.isCancelled { return true }
                    state.idleWaiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.idleWaiters.removeValue(forKey: id) }?.resume()
        }
    }

    private func expire(_ id: UInt64) {
        let (expired, admitted, idle) = state.withLock {
            state -> (Continuation?, [Continuation], [CheckedContinuation<Void, Never>]) in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return (nil, [], []) }
            let waiter = state.waiters.remove(at: index)
            state.queued -= 1
            // The head leaving may let the next ones in.
            return (waiter.continuation, state.admitWaiters(limit: limit), state.wakeIdle(limit: limit))
        }
        expired?.resume(returning: false)
        for continuation in admitted { continuation.resume(returning: true) }
        for continuation in idle { continuation.resume() }
    }
}
