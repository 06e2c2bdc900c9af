import CoreMetrics
import Foundation
import Prometheus
import PushMedia

/// The hook's metrics, through swift-metrics into a Prometheus registry of its own.
public final class ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let gate: JobGate?
    private let inFlight: CoreMetrics.Gauge
    private let queued: CoreMetrics.Gauge
    /// Counters and timers by label and dimensions, made once: creating them costs a registry lookup.
    private let counters = Locked<[String: CoreMetrics.Counter]>([:])
    private let timers = Locked<[String: CoreMetrics.Timer]>([:])

    public init(gate: JobGate?) {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let buckets: [Duration] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
            .seconds(30),
        ]
        factory.defaultDurationHistogramBuckets = buckets
        self.factory = factory
        self.gate = gate
        inFlight = CoreMetrics.Gauge(label: "pushmedia_jobs_in_flight", factory: factory)
        queued = CoreMetrics.Gauge(label: "pushmedia_jobs_queued", factory: factory)
        apnsUpstreamConnections = CoreMetrics.Gauge(label: "pushmedia_apns_upstream_connections", factory: factory)
    }

    private func counter(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        var key = label
        for (name, value) in dimensions {
            key += "\u{1F}"
            key += name
            key += "="
            key += value
        }
        return counters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
            cache[key] = counter
            return counter
        }
    }

    private func timer(_ label: String) -> CoreMetrics.Timer {
        timers.withLock { cache in
            if let timer = cache[label] { return timer }
            let timer = CoreMetrics.Timer(label: label, factory: factory)
            cache[label] = timer
            return timer
        }
    }

    /// Counts one HTTP answer.
    public func request(route: String, status: Int) {
        counter("pushmedia_http_requests_total", [("route", route), ("status", String(status))]).increment()
    }

    /// Counts one payload's outcome, its stage times, cache use and bytes.
    public func record(_ outcome: Outcome) {
        counter("pushmedia_outcomes_total", [("status", outcome.status.rawValue), ("reason", outcome.reason ?? "")])
            .increment()
        let timings = outcome.timingsMs
        timer("pushmedia_total_seconds").recordNanoseconds(Int64(timings.total * 1_000_000))
        if let hit = outcome.cacheHit {
            counter("pushmedia_cache_requests_total", [("result", hit ? "hit" : "miss")]).increment()
            if !hit {
                if timings.fetch > 0 {
                    timer("pushmedia_fetch_seconds").recordNanoseconds(Int64(timings.fetch * 1_000_000))
                }
                if timings.transcode > 0 {
                    timer("pushmedia_transcode_seconds").recordNanoseconds(Int64(timings.transcode * 1_000_000))
                }
                if let bytes = outcome.sourceBytes {
                    counter("pushmedia_fetched_bytes_total").increment(by: Int(bytes))
                }
                if let bytes = outcome.attachment?.bytes, [.processed, .passthrough].contains(outcome.status) {
                    counter("pushmedia_stored_bytes_total").increment(
                        by: Int(bytes) + Int(outcome.thumbnail?.bytes ?? 0))
                }
            }
        }
    }

    /// Open connections to the APNs upstream, when the relay runs.
    let apnsConnections = Locked<(@Sendable () -> Int)?>(nil)
    private let apnsUpstreamConnections: CoreMetrics.Gauge

    /// Counts one push through the APNs relay: Apple's status and reason (or the relay's own
    /// refusal), how it was handled (`processed`, `memo`, `passthrough`, `refused`) and the
    /// time the relay added to the upstream's.
    func apnsPush(status: Int, reason: String?, handling: String, added: Duration) {
        counter(
            "pushmedia_apns_pushes_total",
            [("status", String(status)), ("reason", reason ?? ""), ("handling", handling)]
        ).increment()
        timer("pushmedia_apns_added_seconds").recordNanoseconds(added.nanoseconds)
    }

    /// Counts one message through the FCM relay: the upstream's status (or the relay's own
    /// refusal), how it was handled, and the time the relay added to the upstream's.
    func fcmMessage(status: Int, handling: String, added: Duration) {
        counter("pushmedia_fcm_messages_total", [("status", String(status)), ("handling", handling)]).increment()
        timer("pushmedia_fcm_added_seconds").recordNanoseconds(added.nanoseconds)
    }

    /// Prometheus text exposition.
    public func render() -> [UInt8] {
        inFlight.record(gate?.inFlight ?? 0)
        queued.record(gate?.queued ?? 0)
        if let connections = apnsConnections.withLock({ $0 }) { apnsUpstreamConnections.record(connections()) }
        return registry.emitToBuffer()
    }
}
