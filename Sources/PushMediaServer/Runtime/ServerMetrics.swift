import CoreMetrics
import Foundation
import Prometheus
import PushMedia
import PushMediaRelay

/// The hook's metrics, through swift-metrics into a Prometheus registry of its own.
public final class ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    /// Where other parts (the fleet) make their metrics, on the same registry.
    public let factory: PrometheusMetricsFactory
    private let inFlight: CoreMetrics.Gauge
    private let queued: CoreMetrics.Gauge
    /// Counters by label and dimension values, timers by label, made once: creating them costs a
    /// registry lookup.
    private let counters = Locked<[MetricKey: CoreMetrics.Counter]>([:])
    private let timers = Locked<[String: CoreMetrics.Timer]>([:])
    /// The relays' counters of answers without a reason (almost every push), by relay, status and
    /// handling packed in an integer (`relayCounter`): no string hashed per push.
    private let relayCounters = Locked<[Int: CoreMetrics.Counter]>([:])
    /// The time the relays add, made once.
    private let apnsAdded: CoreMetrics.Timer
    private let fcmAdded: CoreMetrics.Timer
    /// Every outcome's: the time it took, whether the cache answered, its status when it has no reason.
    private let totalTimer: CoreMetrics.Timer
    private let cacheHits: CoreMetrics.Counter
    private let cacheMisses: CoreMetrics.Counter
    private let outcomeCounters = Locked<[OutcomeStatus: CoreMetrics.Counter]>([:])

    /// An empty registry: the other parts count into it, and what it reads from them as it is
    /// scraped comes with each `render` (`MetricsReadings`).
    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let buckets: [Duration] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
            .seconds(30),
        ]
        factory.defaultDurationHistogramBuckets = buckets
        self.factory = factory
        inFlight = CoreMetrics.Gauge(label: "pushmedia_jobs_in_flight", factory: factory)
        queued = CoreMetrics.Gauge(label: "pushmedia_jobs_queued", factory: factory)
        apnsUpstreamConnections = CoreMetrics.Gauge(label: "pushmedia_apns_upstream_connections", factory: factory)
        totalTimer = CoreMetrics.Timer(label: "pushmedia_total_seconds", factory: factory)
        cacheHits = CoreMetrics.Counter(
            label: "pushmedia_cache_requests_total", dimensions: [("result", "hit")], factory: factory)
        cacheMisses = CoreMetrics.Counter(
            label: "pushmedia_cache_requests_total", dimensions: [("result", "miss")], factory: factory)
        apnsAdded = CoreMetrics.Timer(label: "pushmedia_apns_added_seconds", factory: factory)
        fcmAdded = CoreMetrics.Timer(label: "pushmedia_fcm_added_seconds", factory: factory)
    }

    /// A counter's label and its dimensions' values, in the order of their names (fixed per label).
    private struct MetricKey: Hashable {
        var label: String
        var v0 = "", v1 = "", v2 = ""

        init(_ label: String, _ v0: String = "", _ v1: String = "", _ v2: String = "") {
            (self.label, self.v0, self.v1, self.v2) = (label, v0, v1, v2)
        }
    }

    /// The counter for `key`; its `dimensions` (names and the key's values) are only built the
    /// first time, so that counting costs no allocation.
    private func counter(_ key: MetricKey, _ dimensions: @autoclosure () -> [(String, String)] = [])
        -> CoreMetrics.Counter
    {
        counters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = CoreMetrics.Counter(label: key.label, dimensions: dimensions(), factory: factory)
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
        let code = String(status)
        counter(MetricKey("pushmedia_http_requests_total", route, code), [("route", route), ("status", code)])
            .increment()
    }

    /// Counts one payload's outcome, its stage times, cache use and bytes.
    public func record(_ outcome: Outcome) {
        if let reason = outcome.reason {
            let status = outcome.status.rawValue
            counter(MetricKey("pushmedia_outcomes_total", status, reason), [("status", status), ("reason", reason)])
                .increment()
        } else {
            outcomeCounter(outcome.status).increment()
        }
        let timings = outcome.timingsMs
        totalTimer.recordNanoseconds(Int64(timings.total * 1_000_000))
        if let hit = outcome.cacheHit {
            (hit ? cacheHits : cacheMisses).increment()
            if !hit {
                if timings.fetch > 0 {
                    timer("pushmedia_fetch_seconds").recordNanoseconds(Int64(timings.fetch * 1_000_000))
                }
                if timings.transcode > 0 {
                    timer("pushmedia_transcode_seconds").recordNanoseconds(Int64(timings.transcode * 1_000_000))
                }
                if let bytes = outcome.sourceBytes {
                    counter(MetricKey("pushmedia_fetched_bytes_total")).increment(by: Int(bytes))
                }
                if let bytes = outcome.attachment?.bytes, outcome.status.delivered {
                    counter(MetricKey("pushmedia_stored_bytes_total")).increment(
                        by: Int(bytes) + Int(outcome.thumbnail?.bytes ?? 0))
                }
            }
        }
    }

    /// Counts one media URL request: its profile and how it was answered (`cache`, `processed`,
    /// `passthrough`, `best_attempt`, `preview`, `source_redirect`, `extension_redirect`,
    /// `refused`, `failed`).
    func mediaURL(profile: String, outcome: String) { mediaURLCounter(profile: profile, outcome: outcome).increment() }

    /// The counter `mediaURL` counts in, for an answer kept to be given again.
    func mediaURLCounter(profile: String, outcome: String) -> CoreMetrics.Counter {
        counter(
            MetricKey("pushmedia_media_url_requests_total", profile, outcome),
            [("profile", profile), ("outcome", outcome)])
    }

    /// The jobs counted in `pushmedia_jobs_total` so far.
    private let countedJobs = Locked(0)
    /// Open connections to the APNs upstream, when the relay runs.
    private let apnsUpstreamConnections: CoreMetrics.Gauge

    /// Counts one push through the APNs relay: Apple's status and reason (or the relay's own
    /// refusal), how it was handled (`processed`, `memo`, `passthrough`, `refused`) and the
    /// time the relay added to the upstream's.
    package func apnsPush(status: Int, reason: String?, handling: RelayHandling, added: Duration) {
        if let reason {
            let code = String(status)
            counter(
                MetricKey("pushmedia_apns_pushes_total", code, reason, handling.rawValue),
                [("status", code), ("reason", reason), ("handling", handling.rawValue)]
            ).increment()
        } else {
            relayCounter(fcm: false, status: status, handling: handling).increment()
        }
        apnsAdded.recordNanoseconds(added.nanoseconds)
    }

    /// Counts one message through the FCM relay: the upstream's status (or the relay's own
    /// refusal), how it was handled, and the time the relay added to the upstream's.
    package func fcmMessage(status: Int, handling: RelayHandling, added: Duration) {
        relayCounter(fcm: true, status: status, handling: handling).increment()
        fcmAdded.recordNanoseconds(added.nanoseconds)
    }

    /// The counter of outcomes with `status` and no reason.
    private func outcomeCounter(_ status: OutcomeStatus) -> CoreMetrics.Counter {
        if let known = outcomeCounters.withLock({ $0[status] }) { return known }
        let made = counter(
            MetricKey("pushmedia_outcomes_total", status.rawValue, ""), [("status", status.rawValue), ("reason", "")])
        outcomeCounters.withLock { $0[status] = made }
        return made
    }

    /// A relay's counter of answers with `status` and no reason, handled so.
    private func relayCounter(fcm: Bool, status: Int, handling: RelayHandling) -> CoreMetrics.Counter {
        let packed = (fcm ? 1 << 20 : 0) | (min(max(status, 0), 999) << 4) | handling.index
        if let known = relayCounters.withLock({ $0[packed] }) { return known }
        let code = String(status)
        let made =
            fcm
            ? counter(
                MetricKey("pushmedia_fcm_messages_total", code, handling.rawValue),
                [("status", code), ("handling", handling.rawValue)])
            : counter(
                MetricKey("pushmedia_apns_pushes_total", code, "", handling.rawValue),
                [("status", code), ("reason", ""), ("handling", handling.rawValue)])
        relayCounters.withLock { $0[packed] = made }
        return made
    }

    /// Counts one connection or stream a relay shed to stay within its bounds (`RelayLimits`):
    /// `relay` is `apns` or `fcm`; `reason` says which bound.
    package func relayShed(relay: String, reason: ShedReason) {
        counter(
            MetricKey("pushmedia_relay_shed_total", relay, reason.rawValue),
            [("relay", relay), ("reason", reason.rawValue)]
        )
        .increment()
    }

    /// The log's dropped lines counted in `pushmedia_log_lines_dropped_total` so far.
    private let loggedDrops = Locked(0)

    /// Prometheus text exposition, with what `readings` reads from the other parts now.
    public func render(_ readings: MetricsReadings) -> [UInt8] {
        for read in readings.onRead { read() }
        if let drops = readings.logDrops {
            add(total: drops(), to: "pushmedia_log_lines_dropped_total", seen: loggedDrops)
        }
        if let jobs = readings.jobsRun { add(total: jobs(), to: "pushmedia_jobs_total", seen: countedJobs) }
        inFlight.record(readings.gate?.inFlight ?? 0)
        queued.record(readings.gate?.queued ?? 0)
        if let connections = readings.apnsConnections { apnsUpstreamConnections.record(connections()) }
        return registry.emitToBuffer()
    }

    /// Counts in `label` what `total` (a part's running count) has gained since `seen`.
    private func add(total: Int, to label: String, seen: Locked<Int>) {
        let new = seen.withLock { seen in
            defer { seen = max(seen, total) }
            return total - seen
        }
        let counter = counter(MetricKey(label))
        if new > 0 { counter.increment(by: new) }
    }
}

/// The relays count in the server's metrics.
extension ServerMetrics: RelayMetrics {}
