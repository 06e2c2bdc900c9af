import Foundation

/// Backpressure: at most `limit` jobs run at once and at most `queueLimit` wait for a slot.
/// Past that, a new job is refused at once and its payload is answered `overloaded`.
public final class JobGate: @unchecked Sendable {
    /// What `reserve` decided.
    public enum Ticket: Sendable {
        /// A slot is held; call `release()` when the job ends.
        case running
        /// Queued: `wait(until:)` before running.
        case queued
        case refused
    }

    public let limit: Int
    public let queueLimit: Int
    private let lock = NSLock()
    private var running = 0
    private var reservedQueue = 0
    private var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextID: UInt64 = 0

    public init(limit: Int, queueLimit: Int) {
        self.limit = max(1, limit)
        self.queueLimit = max(0, queueLimit)
    }

    /// Jobs holding a slot.
    public var inFlight: Int { lock.withLock { running } }
    /// Jobs waiting for a slot.
    public var queued: Int { lock.withLock { reservedQueue } }

    /// Takes a slot, or a place in the queue, or neither — without waiting.
    public func reserve() -> Ticket {
        lock.withLock {
            if running < limit && reservedQueue == 0 {
                running += 1
                return .running
            }
            if reservedQueue < queueLimit {
                reservedQueue += 1
                return .queued
            }
            return .refused
        }
    }

    /// For a `.queued` ticket: waits for a slot until `deadline`. Returns false (and gives the
    /// queue place back) when the deadline passes first.
    public func wait(until deadline: ContinuousClock.Instant) async -> Bool {
        let id: UInt64 = lock.withLock { nextID += 1; return nextID }
        let timer = Task {
            try? await Task.sleep(until: deadline, clock: .continuous)
            self.expire(id)
        }
        let admitted = await withCheckedContinuation { continuation in
            lock.lock()
            if running < limit {
                running += 1
                reservedQueue -= 1
                lock.unlock()
                continuation.resume(returning: true)
            } else if ContinuousClock.now >= deadline {
                reservedQueue -= 1
                lock.unlock()
                continuation.resume(returning: false)
            } else {
                waiters.append((id, continuation))
                lock.unlock()
            }
        }
        timer.cancel()
        return admitted
    }

    /// Gives a slot back and wakes the longest waiter.
    public func release() {
        lock.lock()
        if !waiters.isEmpty {
            let next = waiters.removeFirst()
            reservedQueue -= 1
            lock.unlock()
            next.continuation.resume(returning: true)  // the slot passes straight to it
        } else {
            running -= 1
            lock.unlock()
        }
    }

    private func expire(_ id: UInt64) {
        lock.lock()
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return lock.unlock() }
        let waiter = waiters.remove(at: index)
        reservedQueue -= 1
        lock.unlock()
        waiter.continuation.resume(returning: false)
    }
}
