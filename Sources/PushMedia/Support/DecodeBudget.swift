import Foundation

/// Bounds the memory of the image decodes running at once. Each transcode reserves what its
/// decode will hold (estimated from the header before any pixel is decoded) and waits, in
/// arrival order, until that fits beside the others; one larger than the whole budget runs
/// alone. Peak memory then follows `--decode-memory`, not the number of jobs.
public final class DecodeBudget: @unchecked Sendable {
    /// Bytes that may be reserved at once.
    public let limit: Int64
    private let lock = NSLock()
    private var used: Int64 = 0
    private var waiters: [(id: UInt64, bytes: Int64, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextID: UInt64 = 0

    public init(limit: Int64) {
        self.limit = max(1, limit)
    }

    /// Bytes reserved now.
    public var reserved: Int64 { lock.withLock { used } }

    /// Reserves `bytes` (at most `limit`), waiting for room until `deadline`. Returns the bytes
    /// to `release`, or nil when the deadline passed first.
    public func reserve(_ bytes: Int64, until deadline: ContinuousClock.Instant) async -> Int64? {
        let amount = min(max(bytes, 1), limit)
        let id: UInt64 = lock.withLock { nextID += 1; return nextID }
        let timer = Task {
            try? await Task.sleep(until: deadline, clock: .continuous)
            self.expire(id)
        }
        defer { timer.cancel() }
        let admitted = await withCheckedContinuation { continuation in
            lock.lock()
            if waiters.isEmpty && used + amount <= limit {
                used += amount
                lock.unlock()
                continuation.resume(returning: true)
            } else if ContinuousClock.now >= deadline {
                lock.unlock()
                continuation.resume(returning: false)
            } else {
                waiters.append((id, amount, continuation))
                lock.unlock()
            }
        }
        return admitted ? amount : nil
    }

    /// Gives back what `reserve` returned and admits the waiters that now fit, in order.
    public func release(_ bytes: Int64) {
        lock.lock()
        used -= bytes
        let admitted = admitWaiters()
        lock.unlock()
        for continuation in admitted { continuation.resume(returning: true) }
    }

    /// Takes the waiters that now fit, in order, off the queue. Call with the lock held; resume
    /// what it returns after unlocking.
    private func admitWaiters() -> [CheckedContinuation<Bool, Never>] {
        var admitted: [CheckedContinuation<Bool, Never>] = []
        while let first = waiters.first, used + first.bytes <= limit {
            used += first.bytes
            admitted.append(waiters.removeFirst().continuation)
        }
        return admitted
    }

    private func expire(_ id: UInt64) {
        lock.lock()
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return lock.unlock() }
        let waiter = waiters.remove(at: index)
        let admitted = admitWaiters()  // the head leaving may let the next ones in
        lock.unlock()
        waiter.continuation.resume(returning: false)
        for continuation in admitted { continuation.resume(returning: true) }
    }
}
