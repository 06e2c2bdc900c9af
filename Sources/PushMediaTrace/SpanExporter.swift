import CoreMetrics
import Dispatch
import Foundation
import Logging
import PushMedia
import ServiceLifecycle
import Synchronization

/// The spans' way out of the process: the ring ended spans go into, and one thread of its own
/// that takes them in batches, encodes each batch (OTLP protobuf) and posts it to the collector
/// (OTLP/HTTP). Nothing on a request's path waits for it: a span that finds the ring full is
/// dropped, and so is a batch the collector does not take within the timeout; both are counted
/// (`lost`). The thread wakes every `scheduleDelay` (half a second), and sooner when a batch's
/// worth has ended.
public final class SpanExporter: Sendable {
    public struct Settings: Sendable {
        /// Where batches are posted: the collector's `/v1/traces`.
        public var url: String
        /// Sent with each batch (an API key): never logged.
        public var headers: [(String, String)]
        public var serviceName: String
        public var resourceAttributes: [String: String]
        /// Ended spans held for export (rounded up to a power of two).
        public var maxQueue: Int
        /// How long spans that fill less than a batch wait to be sent.
        public var scheduleDelay: Duration
        /// A batch the collector has not taken within this is lost.
        public var timeout: Duration

        public init(
            url: String, headers: [(String, String)], serviceName: String, resourceAttributes: [String: String],
            maxQueue: Int, scheduleDelay: Duration = .milliseconds(500), timeout: Duration = .seconds(5)
        ) {
            self.url = url
            self.headers = headers
            self.serviceName = serviceName
            self.resourceAttributes = resourceAttributes
            self.maxQueue = maxQueue
            self.scheduleDelay = scheduleDelay
            self.timeout = timeout
        }
    }

    private let settings: Settings
    private let ring: SpanRing
    /// Spans per batch (at most 512, as OpenTelemetry's batch processor sends, and half the
    /// ring); the thread is woken each time that many more have ended.
    private let batchLimit: Int
    private let wake = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    /// The thread's end and who waits for it: behind a lock ThreadSanitizer sees (the standard
    /// library's `Mutex` is a bare futex on Linux, which it does not).
    private let exit = Locked(Exit())
    private let lost: Counter
    private let logger: Logger

    private struct Exit {
        var done = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    /// Starts the thread. Spans lost are counted with `lost`; the exporter's warnings (rate
    /// limited) go to `logger`.
    public init(settings: Settings, lost: Counter, logger: Logger) {
        self.settings = settings
        ring = SpanRing(minimum: settings.maxQueue)
        var batch = 1
        while batch < 512, batch * 2 <= ring.capacity / 2 { batch *= 2 }
        batchLimit = batch
        self.lost = lost
        self.logger = logger
        let thread = Thread { [self] in run() }
        thread.start()
    }

    /// An ended span, from the thread that ended it.
    func add(_ span: FinishedSpan) {
        let (stored, position) = ring.put(span)
        if stored, position & (batchLimit - 1) == batchLimit - 1 { wake.signal() }
    }

    /// Wakes the thread to send what has ended so far.
    public func flush() { wake.signal() }

    /// Stops the thread once it has sent what the ring holds (each batch within the timeout).
    public func shutdown() async {
        stopping.store(true, ordering: .releasing)
        wake.signal()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = exit.withLock { state in
                if !state.done { state.waiting.append(continuation) }
                return state.done
            }
            if done { continuation.resume() }
        }
    }

    private func run() {
        // Named where `top -H`, perf and /proc show threads (15 characters at most), from the
        // thread itself: Foundation names only the current thread on Linux.
        Thread.current.name = "pushmedia-trace"
        let client = CollectorClient(url: settings.url, headers: settings.headers, timeout: settings.timeout)
        var encoding = OTLPEncoding(
            serviceName: settings.serviceName, resourceAttributes: settings.resourceAttributes)
        var warnings = Warnings()
        var batch: [FinishedSpan] = []
        batch.reserveCapacity(batchLimit)
        // In whole milliseconds, one at least: a shorter wait would spin.
        let (seconds, attoseconds) = settings.scheduleDelay.components
        let delay = DispatchTimeInterval.milliseconds(
            max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)))
        while true {
            _ = wake.wait(timeout: .now() + delay)
            let stop = stopping.load(ordering: .acquiring)
            repeat {
                batch.removeAll(keepingCapacity: true)
                while batch.count < batchLimit, let span = ring.take() { batch.append(span) }
                if !batch.isEmpty { send(batch, with: client, encoding: &encoding, warnings: &warnings) }
            } while batch.count == batchLimit
            let dropped = ring.takeDropped()
            if dropped > 0 {
                lost.increment(by: dropped)
                warnings.warn(
                    "traces: the export queue is full: spans dropped", logger: logger,
                    metadata: ["dropped_count": "\(dropped)", "queue_size": "\(ring.capacity)"])
            }
            if stop { break }
        }
        let waiting = exit.withLock { state in
            state.done = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    private func send(
        _ batch: [FinishedSpan], with client: CollectorClient?, encoding: inout OTLPEncoding, warnings: inout Warnings
    ) {
        let reason: String
        do {
            guard let client else { throw CollectorClient.Failure.transfer("libcurl could not create a handle") }
            try client.post(try encoding.encode(batch))
            return
        } catch let failure as CollectorClient.Failure {
            reason = failure.description
        } catch {
            reason = "the batch could not be encoded: \(error)"
        }
        lost.increment(by: batch.count)
        warnings.warn(
            "traces: the collector did not take a batch", logger: logger,
            metadata: ["batch_size": "\(batch.count)", "error": "\(reason)"])
    }

    /// At most one warning every 10 s; the ones held back are counted on the next.
    private struct Warnings {
        private var quietUntil = ContinuousClock.now
        private var held = 0

        mutating func warn(_ message: Logger.Message, logger: Logger, metadata: Logger.Metadata) {
            let now = ContinuousClock.now
            guard now >= quietUntil else {
                held += 1
                return
            }
            var metadata = metadata
            if held > 0 { metadata["warnings_held_back"] = "\(held)" }
            logger.warning(message, metadata: metadata)
            quietUntil = now + .seconds(10)
            held = 0
        }
    }
}

/// The exporter among a process's services (first, so it stops last): when they stop, it sends
/// the spans they ended and stops its thread.
public struct SpanExportService: Service {
    let exporter: SpanExporter

    public init(exporter: SpanExporter) { self.exporter = exporter }

    public func run() async throws {
        try? await gracefulShutdown()
        await exporter.shutdown()
    }
}
