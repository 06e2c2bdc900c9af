import Foundation

/// A fixed set of dedicated threads for blocking C calls (libcurl, libvips, libmagic), so that
/// they never occupy Swift's cooperative thread pool. Threads start lazily, up to `maxThreads`,
/// and end after `idleTimeout` without work (an executor no longer used lets its threads go);
/// extra work waits in a FIFO queue.
public final class BlockingExecutor: @unchecked Sendable {
    private let name: String
    /// The most threads it runs at once.
    public let maxThreads: Int
    /// Guards the queue and the counts.
    let condition = NSCondition()
    private var queue: [@Sendable () -> Void] = []
    private var head = 0
    /// Threads running now, busy or idle.
    var threads = 0
    private var idle = 0
    private let idleTimeout: TimeInterval

    public init(name: String, maxThreads: Int, idleTimeout: Duration = .seconds(30)) {
        self.name = name
        self.maxThreads = max(1, maxThreads)
        self.idleTimeout = Double(idleTimeout.components.seconds) + Double(idleTimeout.components.attoseconds) / 1e18
    }

    /// Runs `work` on one of the executor's threads and returns its result.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            submit { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Non-throwing variant of `run`.
    public func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: work()) }
        }
    }

    /// Runs `work` on one of the executor's threads, without waiting for it.
    public func execute(_ work: @escaping @Sendable () -> Void) { submit(work) }

    /// Work waiting for a thread.
    public var queued: Int {
        condition.lock()
        defer { condition.unlock() }
        return queue.count - head
    }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        queue.append(job)
        if idle == 0 && threads < maxThreads {
            threads += 1
            let thread = Thread { [self] in loop() }
            thread.name = "\(name)-\(threads)"
            thread.stackSize = 4 << 20
            thread.start()
        } else {
            condition.signal()
        }
        condition.unlock()
    }

    private static let done: @Sendable () -> Void = {}

    private func loop() {
        while true {
            condition.lock()
            while head == queue.count {
                idle += 1
                let woken = condition.wait(until: Date(timeIntervalSinceNow: idleTimeout))
                idle -= 1
                if !woken && head == queue.count {
                    threads -= 1
                    condition.unlock()
                    return
                }
            }
            let job = queue[head]
            // Drop the queue's reference at once: a job's closure holds what it captured (decoded
            // images, encoded bytes) until released, and taken jobs stay in the array until it is
            // compacted.
            queue[head] = Self.done
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 256 && head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job()
        }
    }
}
