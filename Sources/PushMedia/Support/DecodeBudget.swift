import Foundation

/// Bounds the memory of the image decodes running at once. Each transcode reserves what its
/// decode will hold (estimated from the header before any pixel is decoded) and waits, in
/// arrival order, until that fits beside the others; one larger than the whole budget runs
/// alone. Peak memory then follows `--decode-memory`, not the number of jobs.
/// A `DeadlineSemaphore` of `limit` bytes with an unbounded queue.
public final class DecodeBudget: Sendable {
    private let bytes: DeadlineSemaphore

    public init(limit: Int64) {
        bytes = DeadlineSemaphore(limit: limit)
    }

    /// Bytes that may be reserved at once.
    public var limit: Int64 { bytes.limit }
    /// Bytes reserved now.
    public var reserved: Int64 { bytes.used }
    /// Reservations waiting for room now, in their place in the arrival order.
    var waiting: Int { bytes.waiting }

    /// Reserves `bytes` (at most `limit`), waiting for room until `deadline`. Returns the bytes
    /// to `release`, or nil when the deadline passed first.
    public func reserve(_ bytes: Int64, until deadline: ContinuousClock.Instant) async -> Int64? {
        await self.bytes.acquire(bytes, until: deadline)
    }

    /// Gives back what `reserve` returned and admits the waiters that now fit, in order.
    public func release(_ bytes: Int64) {
        self.bytes.release(bytes)
    }
}
