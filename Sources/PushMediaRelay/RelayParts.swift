import Prometheus
import PushMedia

/// What the server hands the relays, built once by it: the pipeline and the answers kept for
/// repeated bodies (shared with the hook), where outcomes, pushes and sheds are counted, the
/// log's lines, the held credentials, and what makes the upstreams. The relays reach nothing
/// of the server but this.
package struct RelayParts: Sendable {
    package let pipeline: Pipeline
    package let answers: RepeatAnswers
    /// The public base URL of the stored media, known once the hook listens.
    package let baseURL: @Sendable () -> String
    package let metrics: any RelayMetrics
    package let lines: any RelayLines
    package let credentials: RelayCredentials
    package let upstreams: UpstreamMaker
    package let limits: RelayLimits
    /// Which pushes begin a recorded trace (`--otel-sampler`): nil without `--otel-endpoint`.
    package let sampler: TraceSampler?

    package init(
        pipeline: Pipeline, answers: RepeatAnswers, baseURL: @escaping @Sendable () -> String,
        metrics: any RelayMetrics, lines: any RelayLines, credentials: RelayCredentials, upstreams: UpstreamMaker,
        limits: RelayLimits, sampler: TraceSampler? = nil
    ) {
        (self.pipeline, self.answers, self.baseURL, self.metrics) = (pipeline, answers, baseURL, metrics)
        (self.lines, self.credentials, self.upstreams, self.limits) = (lines, credentials, upstreams, limits)
        self.sampler = sampler
    }
}

/// What the relays count: in `serve`, the server's metrics, on its Prometheus registry.
package protocol RelayMetrics: Sendable {
    /// Where the held credentials' metrics are made (`CredentialMetric`).
    var registry: PrometheusCollectorRegistry { get }
    /// Counts one payload's outcome, as every door does.
    func record(_ outcome: Outcome)
    /// Counts one push through the APNs relay: Apple's status and reason (or the relay's own
    /// refusal), how it was handled and the time the relay added to the upstream's.
    func apnsPush(status: Int, reason: String?, handling: RelayHandling, added: Duration)
    /// Counts one message through the FCM relay: the upstream's status (or the relay's own
    /// refusal), how it was handled, and the time the relay added to the upstream's.
    func fcmMessage(status: Int, handling: RelayHandling, added: Duration)
    /// Counts one connection or stream a relay (`apns` or `fcm`) shed to stay within its bounds.
    func relayShed(relay: String, reason: ShedReason)
}

/// Where a relay writes each request's line (a push's, a message's): in `serve`, the log.
package protocol RelayLines: Sendable {
    /// One `info` line with `fields`, which the caller gives sorted by key, and the ids of the
    /// request's span (`PipelineTrace.logIDs(of:)`), which the line carries when traces are on.
    func info(_ message: String, _ fields: [(String, String)], trace: TraceParent?)
}
