import PushMedia

/// What `/metrics` reads from the other parts as it is scraped (`ServerMetrics.render`): made
/// once every part it reads exists, and given to the routes that answer `/metrics`.
public struct MetricsReadings: Sendable {
    /// The job gate: `pushmedia_jobs_in_flight` and `pushmedia_jobs_queued`.
    var gate: JobGate?
    /// The jobs the pipeline has run so far (`Pipeline.jobsRun`): `pushmedia_jobs_total`, one per
    /// media fetched and made here, however many requests waited for it.
    var jobsRun: (@Sendable () -> Int)?
    /// The log's dropped lines so far (`LogSink.droppedLines`): `pushmedia_log_lines_dropped_total`.
    var logDrops: (@Sendable () -> Int)?
    /// Open connections to the APNs upstream, the relay's and the held credentials', when the
    /// relay runs: `pushmedia_apns_upstream_connections`.
    var apnsConnections: (@Sendable () -> Int)?
    /// Called before the exposition is rendered: a part that counts in the background (the
    /// fleet's queue) starts its next count, shown by a later read.
    var onRead: [@Sendable () -> Void] = []

    public init(
        gate: JobGate? = nil, jobsRun: (@Sendable () -> Int)? = nil, logDrops: (@Sendable () -> Int)? = nil,
        apnsConnections: (@Sendable () -> Int)? = nil, onRead: [@Sendable () -> Void] = []
    ) {
        self.gate = gate
        self.jobsRun = jobsRun
        self.logDrops = logDrops
        self.apnsConnections = apnsConnections
        self.onRead = onRead
    }
}
