import Foundation

/// Backpressure: at most `limit` jobs run at once and at most `queueLimit` wait for a slot.
/// Past that, a new job is refused at once and its payload is answered `overloaded`.
/// A `DeadlineSemaphore` of `limit` slots, one per job.
public final class JobGate: Sendable {
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
    private let slots: DeadlineSemaphore

    public init(limit: Int, queueLimit: Int) {
        self.limit = max(1, limit)
        self.queueLimit = max(0, queueLimit)
        slots = DeadlineSemaphore(limit: Int64(self.limit), queueLimit: self.queueLimit)
    }

    /// Jobs holding a slot.
    public var inFlight: Int { Int(slots.used) }
    /// Jobs waiting for a slot.
    public var queued: Int { slots.queued }
    /// Queued jobs already in `wait`.
    var waiting: Int { slots.waiting }

    /// Takes a slot, or a place in the queue, or neither — without waiting.
    public func reserve() -> Ticket {
        switch slots.reserve() {
        case .acquired: .running
        case .queued: .queued
        case .refused: .refused
        }
    }

    /// For a `.queued` ticket: waits for a slot until `deadline`. Returns false (and gives the
    /// queue place back) when the deadline passes first.
    public func wait(until deadline: ContinuousClock.Instant) async -> Bool {
        await slots.wait(until: deadline)
    }

    /// Returns once no job waits for a slot and one is free, or when the task is cancelled: for
    /// background work that yields to requests (it takes no slot: `reserve` still decides).
    public func idle() async { await slots.idle() }

    /// Gives a slot back and wakes the longest waiter.
    public func release() {
        slots.release()
    }
}
