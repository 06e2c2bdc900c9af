import Foundation
import Logging
import Prometheus
import PushMedia
import PushMediaTestSupport

@testable import PushMediaRelay

/// What the relays count, kept for the tests to read (in `serve`, the server's metrics).
final class TestRelayMetrics: RelayMetrics, @unchecked Sendable {
    let registry = PrometheusCollectorRegistry()
    private let lock = NSLock()
    private var counted: [String] = []

    /// Everything counted so far, one entry per count (`apns 200 processed`, `shed fcm streams`…).
    var counts: [String] {
        lock.lock()
        defer { lock.unlock() }
        return counted
    }

    private func add(_ entry: String) {
        lock.lock()
        counted.append(entry)
        lock.unlock()
    }

    func record(_ outcome: Outcome) { add("outcome \(outcome.status.rawValue)") }
    func apnsPush(status: Int, reason: String?, handling: RelayHandling, added: Duration) {
        add("apns \(status) \(reason.map { $0 + " " } ?? "")\(handling.rawValue)")
    }
    func fcmMessage(status: Int, handling: RelayHandling, added: Duration) { add("fcm \(status) \(handling.rawValue)") }
    func relayShed(relay: String, reason: ShedReason) { add("shed \(relay) \(reason.rawValue)") }
}

/// The relays' request lines, kept for the tests to read (in `serve`, the log).
final class TestRelayLines: RelayLines, @unchecked Sendable {
    private let lock = NSLock()
    private var written: [(message: String, fields: [(String, String)], trace: TraceParent?)] = []

    var lines: [(message: String, fields: [(String, String)], trace: TraceParent?)] {
        lock.lock()
        defer { lock.unlock() }
        return written
    }

    func info(_ message: String, _ fields: [(String, String)], trace: TraceParent?) {
        lock.lock()
        written.append((message, fields, trace))
        lock.unlock()
    }
}

/// The relays' parts as `serve` builds them, without the server: a pipeline over a fresh store,
/// the memo, the held credentials of `relays`, test metrics and lines, and `upstreams`.
struct TestRelayParts {
    let relays: RelaysConfig
    let pipeline: Pipeline
    let answers = RepeatAnswers()
    let metrics = TestRelayMetrics()
    let lines = TestRelayLines()
    let credentials: RelayCredentials
    let parts: RelayParts
    static let baseURL = "https://media.example.com/media"

    init(relays: RelaysConfig, store: TemporaryDirectory, upstreams: UpstreamMaker) throws {
        self.relays = relays
        var config = testConfig(store: store)
        config.baseURL = Self.baseURL
        pipeline = try Pipeline(config: config)
        credentials = try RelayCredentials(
            config: relays, metrics: metrics, logger: Logger(label: "test"), environment: [:], upstreams: upstreams,
            exposure: { _ in })
        parts = RelayParts(
            pipeline: pipeline, answers: answers, baseURL: { Self.baseURL }, metrics: metrics, lines: lines,
            credentials: credentials, upstreams: upstreams, limits: relays.limits)
    }
}
