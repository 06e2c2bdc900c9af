import Foundation
import Logging
import PushMedia
import PushMediaFleet
import PushMediaRelay

/// The hook's parts, shared by the router and the process that runs it. Each is made with what
/// it needs, in the order they need each other: the metrics, the process's resources, the store,
/// the fleet (which counts into the metrics and makes the store forget a purged entry), the
/// pipeline on them, then the relays' parts.
public struct ServerParts: Sendable {
    public let pipeline: Pipeline
    public let metrics: ServerMetrics
    /// The public base URL of `/media`, known once the port is.
    public let baseURL: Locked<String>
    /// The server's own settings.
    public let server: ServerConfig
    /// Ready answers to repeated `/v1/process` bodies (and relayed pushes').
    let answers: RepeatAnswers
    /// The settings a reload changes: tokens, the media URLs' keys and allow-list.
    public let live: LiveSettings
    /// The relays' held credentials (`--relay-credentials`, `--apns-key`); reloaded on SIGHUP.
    public let credentials: RelayCredentials
    /// What the relays are handed: the pipeline, the answers, the metrics, the log's lines, the
    /// credentials and what makes their upstreams.
    let relay: RelayParts
    /// The fleet the pipeline shares its jobs with (`--fleet-db`), or nil.
    public let fleet: Fleet?
    /// `--base-url` when it is the bucket itself (`PushMediaConfig.baseURLIsTheBucket`): where
    /// `/media` sends a phone when the object store does not answer in time.
    let publicMediaBase: String?
    /// The process's tracer and its exporter, when `--otel-endpoint` is given.
    let tracing: TracingBackend?
    /// Which work begins a recorded trace: nil with traces off (no span is started at all).
    var sampler: TraceSampler? { tracing?.sampler }
    /// The log's dropped lines so far, when the server logs through a sink.
    private let logDrops: (@Sendable () -> Int)?

    /// The pipeline runs with `serve`'s defaults (`ServerConfig.served`) for the settings not given.
    public init(config: PushMediaConfig, server: ServerConfig = ServerConfig()) throws {
        try self.init(config: config, server: server, upstreams: .http2)
    }

    /// The same, with the relays' upstreams `upstreams` makes (HTTP/2 over TLS to Apple and
    /// Google, as shipped), the fleet on `fleetDatabase` (checked by the caller), the relays'
    /// lines written to `logSink`, `publicMediaBase`, and the `clock` the store judges freshness
    /// by. With `--otel-endpoint`, this sets the process's tracer (once per process).
    init(
        config: PushMediaConfig, server: ServerConfig, upstreams: UpstreamMaker, fleetDatabase: FleetDatabase? = nil,
        logger: Logger = Logger(label: "pushmedia"), logSink: LogSink? = nil, publicMediaBase: String? = nil,
        clock: WallClock = .system
    ) throws {
        let config = ServerConfig.served(config)
        self.server = server
        self.publicMediaBase = publicMediaBase
        live = try LiveSettings(server)
        let metrics = ServerMetrics()
        self.metrics = metrics
        // Which work begins a recorded trace, decided in one place for the hook, the relays and
        // the fleet; lost spans counted on /metrics.
        let tracing = try server.tracing.exportURL.map { exportURL in
            try TracingBackend(config: server.tracing, exportURL: exportURL, factory: metrics.factory, logger: logger)
        }
        self.tracing = tracing
        let sampler = tracing?.sampler
        // The process's threads, gates and budgets, built once.
        let resources = ProcessResources(config: config)
        let store = try MediaStore(config: config, background: resources.store, clock: clock)
        fleet = try fleetDatabase.map { database in
            try Fleet(
                database: database, lease: config.fleetLease, sampler: sampler, metrics: metrics.factory,
                onPurge: { key in store.forget(key: key) }, logger: logger)
        }
        let pipeline = try Pipeline(
            config: config, resources: resources, store: store, coordinator: fleet, clock: clock)
        self.pipeline = pipeline
        answers = RepeatAnswers(byteLimit: server.memoBytes)
        if let logSink { logDrops = { logSink.droppedLines } } else { logDrops = nil }
        let baseURL = Locked(config.baseURL)
        self.baseURL = baseURL
        credentials = try RelayCredentials(
            config: server.relays, metrics: metrics, logger: logger,
            environment: ProcessInfo.processInfo.environment, upstreams: upstreams,
            exposure: { [server] set in _ = try server.checkRelayExposure(held: set) })
        relay = RelayParts(
            pipeline: pipeline, answers: answers, baseURL: { baseURL.withLock { $0 } }, metrics: metrics,
            lines: RequestLines(logger: logger, sink: logSink), credentials: credentials, upstreams: upstreams,
            limits: server.relay, sampler: sampler)
    }

    /// What `/metrics` reads from these parts as it is scraped (the gate, the jobs run, the log's
    /// dropped lines, the fleet's queue), and the APNs relay's upstream connections when it runs.
    func readings(apnsConnections: (@Sendable () -> Int)? = nil) -> MetricsReadings {
        let pipeline = self.pipeline
        return MetricsReadings(
            gate: pipeline.gate, jobsRun: { pipeline.jobsRun }, logDrops: logDrops, apnsConnections: apnsConnections,
            onRead: fleet.map { fleet in [{ fleet.refreshQueueDepth() }] } ?? [])
    }
}
