import Foundation
import CoreMetrics
import Prometheus
import PushMedia

/// The hook's metrics, through swift-metrics into a Prometheus registry of its own.
public final class ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let gate: JobGate?
    private let inFlight: CoreMetrics.Gauge
    private let queued: CoreMetrics.Gauge

    public init(gate: JobGate?) {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let buckets: [Duration] = [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                                   .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30)]
        factory.defaultDurationHistogramBuckets = buckets
        self.factory = factory
        self.gate = gate
        inFlight = CoreMetrics.Gauge(label: "pushmedia_jobs_in_flight", factory: factory)
        queued = CoreMetrics.Gauge(label: "pushmedia_jobs_queued", factory: factory)
    }

    /// Counts one HTTP answer.
    public func request(route: String, status: Int) {
        CoreMetrics.Counter(label: "pushmedia_http_requests_total", dimensions: [("route", route), ("status", String(status))], factory: factory).increment()
    }

    /// Counts one payload's outcome, its stage times, cache use and bytes.
    public func record(_ outcome: Outcome) {
        CoreMetrics.Counter(label: "pushmedia_outcomes_total", dimensions: [("status", outcome.status.rawValue), ("reason", outcome.reason ?? "")], factory: factory).increment()
        let timings = outcome.timingsMs
        CoreMetrics.Timer(label: "pushmedia_total_seconds", factory: factory).recordNanoseconds(Int64(timings.total * 1_000_000))
        if let hit = outcome.cacheHit {
            CoreMetrics.Counter(label: "pushmedia_cache_requests_total", dimensions: [("result", hit ? "hit" : "miss")], factory: factory).increment()
            if !hit {
                if timings.fetch > 0 { CoreMetrics.Timer(label: "pushmedia_fetch_seconds", factory: factory).recordNanoseconds(Int64(timings.fetch * 1_000_000)) }
                if timings.transcode > 0 { CoreMetrics.Timer(label: "pushmedia_transcode_seconds", factory: factory).recordNanoseconds(Int64(timings.transcode * 1_000_000)) }
                if let bytes = outcome.sourceBytes { CoreMetrics.Counter(label: "pushmedia_fetched_bytes_total", factory: factory).increment(by: Int(bytes)) }
                if let bytes = outcome.attachment?.bytes, [.processed, .passthrough].contains(outcome.status) {
                    CoreMetrics.Counter(label: "pushmedia_stored_bytes_total", factory: factory).increment(by: Int(bytes) + Int(outcome.thumbnail?.bytes ?? 0))
                }
            }
        }
    }

    /// Prometheus text exposition.
    public func render() -> [UInt8] {
        inFlight.record(gate?.inFlight ?? 0)
        queued.record(gate?.queued ?? 0)
        return registry.emitToBuffer()
    }
}
