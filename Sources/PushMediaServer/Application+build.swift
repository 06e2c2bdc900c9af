import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PushMedia
import PushMediaFleet
import PushMediaRelay
import ServiceLifecycle

/// Why the server refuses to start.
public enum ServerError: Error, CustomStringConvertible {
    /// The media URL keys and salts do not pair up.
    case mediaURLKeys(String)
    /// `--fleet-worker` without `--fleet-db`.
    case fleetWorkerWithoutFleet
    /// The trace settings disagree with the `OTEL_*` variables the exporter reads.
    case tracing(String)

    public var description: String {
        switch self {
        case let .mediaURLKeys(why): why
        case let .tracing(why): why
        case .fleetWorkerWithoutFleet:
            "--fleet-worker works the fleet's batches: it needs the fleet's database, --fleet-db (or PUSHMEDIA_FLEET_DB)"
        }
    }
}

/// The hook's parts, shared by the router and the process that runs it.
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
    /// `--base-url` when it is the bucket itself (`PushMediaConfig.baseURLIsTheBucket`): where
    /// `/media` sends a phone when the object store does not answer in time.
    let publicMediaBase: String?
    /// Which work begins a recorded trace: nil with traces off (no span is started at all).
    let sampler: TraceSampler?

    /// The pipeline runs with `serve`'s defaults (`ServerConfig.served`) for the settings not given.
    public init(config: PushMediaConfig, server: ServerConfig = ServerConfig()) throws {
        try self.init(config: config, server: server, upstreams: .http2)
    }

    /// The same, with the relays' upstreams `upstreams` makes (HTTP/2 over TLS to Apple and
    /// Google, as shipped), the fleet's coordination, the relays' lines written to `logSink`,
    /// `publicMediaBase`, the traces' `sampler`, and the `clock` the store judges freshness by.
    init(
        config: PushMediaConfig, server: ServerConfig, upstreams: UpstreamMaker,
        coordinator: (any JobCoordinator)? = nil, logger: Logger = Logger(label: "pushmedia"), logSink: LogSink? = nil,
        publicMediaBase: String? = nil, sampler: TraceSampler? = nil, clock: WallClock = .system
    ) throws {
        let config = ServerConfig.served(config)
        self.server = server
        self.publicMediaBase = publicMediaBase
        self.sampler = sampler
        live = try LiveSettings(server)
        // The process's threads, gates and budgets, built once.
        let pipeline = try Pipeline(
            config: config, resources: ProcessResources(config: config), coordinator: coordinator, clock: clock)
        self.pipeline = pipeline
        answers = RepeatAnswers(byteLimit: server.memoBytes)
        var logDrops: (@Sendable () -> Int)?
        if let logSink { logDrops = { logSink.droppedLines } }
        metrics = ServerMetrics(gate: pipeline.gate, jobsRun: { pipeline.jobsRun }, logDrops: logDrops)
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
}

/// The router: `/v1/process`, `/v1/batch` and `/metrics` (authenticated when tokens or a secret are set;
/// `/metrics` is not here when `--metrics-port` gives it a listener of its own), `/media/<name>`,
/// `/preview` (see `ServerConfig.previewEnabled`), `/healthz`, `/readyz`, `/openapi.yaml`, and media
/// URLs (`/<signature>/<options>/<source>`) on every other path, when configured. `now` is what
/// signed requests' times are checked against, `clock` what the media URLs' kept answers age by.
public func buildRouter(
    _ parts: ServerParts, now: @escaping @Sendable () -> Date = Date.init, clock: DeadlineClock = .continuous
) -> Router<AppRequestContext> {
    let server = parts.server
    let router = Router(context: AppRequestContext.self)
    // First, so that the request's line and every step's are written inside its span.
    if let sampler = parts.sampler { router.add(middleware: TraceMiddleware(sampler: sampler)) }
    router.add(middleware: RequestLogMiddleware(metrics: parts.metrics))
    router.add(middleware: MethodGuardMiddleware())
    let bodyLimit = max(server.maxPayloadBodyBytes, server.maxBatchBodyBytes)
    let auth = AuthMiddleware<AppRequestContext>(live: parts.live, bodyLimit: bodyLimit, now: now)
    let v1 = router.group("v1").add(middleware: auth)
    // Metrics tell about campaigns and load: they need the same credentials as /v1 once any are set.
    // With a listener of its own (--metrics-port), /metrics is served there and not here.
    let scrape = server.metricsPort == nil ? router.group("metrics").add(middleware: auth) : nil
    let baseURL = parts.baseURL
    ProcessRoutes(
        pipeline: parts.pipeline, server: server, metrics: parts.metrics, baseURL: { baseURL.withLock { $0 } },
        answers: parts.answers
    ).add(to: v1)
    let media = StoredMedia(
        store: parts.pipeline.store, memoryLimit: server.mediaMemory, resources: parts.pipeline.resources,
        wait: server.mediaWait, publicBase: parts.publicMediaBase)
    MediaRoutes<AppRequestContext>(media: media).add(to: router)
    MediaURLRoutes<AppRequestContext>(
        pipeline: parts.pipeline, live: parts.live, metrics: parts.metrics, media: media,
        paths: MediaURLPaths(keepsAnswers: server.memoBytes > 0), clock: clock
    ).add(to: router)
    PreviewRoutes<AppRequestContext>(
        pipeline: parts.pipeline, server: server, metrics: parts.metrics,
        baseURL: { baseURL.withLock { $0 } }
    ).add(to: router)
    HealthRoutes<AppRequestContext>(
        pipeline: parts.pipeline, metrics: parts.metrics, minFreeSpace: server.minFreeSpace,
        executor: parts.pipeline.resources.housekeeping, credentials: parts.credentials
    )
    .add(to: router, metrics: scrape)
    return router
}

/// The fleet named by `--fleet-db`, checked; nil without one.
func openFleet(config: PushMediaConfig, sampler: TraceSampler?, logger: Logger) async throws -> Fleet? {
    guard let database = try FleetDatabase(config: config) else { return nil }
    do {
        try await database.check(logger: logger)
    } catch {
        guard error.isOutage else { throw error }
        logger.warning(
            "fleet database unavailable at start: jobs are shared per node until it is back",
            metadata: ["database": "\(database.described)", "error": "\(error)"])
    }
    let fleet = try Fleet(database: database, lease: config.fleetLease, sampler: sampler, logger: logger)
    logger.info("fleet", metadata: ["database": "\(database.described)", "node": "\(fleet.node)"])
    return fleet
}

/// The application: checks that a public listener has auth and that the store answers (an
/// object store: endpoint, credentials, bucket), derives the base URL from the bound address
/// unless `--base-url` was given, runs retention every `gcEvery` when set, opens the APNs and FCM
/// relays when `server.apns.port` / `server.fcm.port` are set (`onAPNsRunning`, `onFCMRunning`),
/// and calls `onRunning` with the port. The pipeline runs with `serve`'s defaults for `max-jobs` and `background-limit`
/// unless `config` gives them (see `ServerParts.init`).
public func buildApplication(
    config: PushMediaConfig, server: ServerConfig, baseURLGiven: Bool, logger: Logger, logSink: LogSink? = nil,
    settings: (start: SettingsSnapshot, read: @Sendable () throws -> SettingsSnapshot)? = nil,
    onMetricsRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onAPNsRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void = { _, _ in },
    onFCMRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void = { _, _ in },
    onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    try await buildApplication(
        config: config, server: server, baseURLGiven: baseURLGiven, logger: logger, logSink: logSink,
        settings: settings, upstreams: .http2, onMetricsRunning: onMetricsRunning, onAPNsRunning: onAPNsRunning,
        onFCMRunning: onFCMRunning, onRunning: onRunning)
}

/// The same, with the relays' upstreams `upstreams` makes.
func buildApplication(
    config: PushMediaConfig, server: ServerConfig, baseURLGiven: Bool, logger: Logger, logSink: LogSink?,
    settings: (start: SettingsSnapshot, read: @Sendable () throws -> SettingsSnapshot)?, upstreams: UpstreamMaker,
    onMetricsRunning: @escaping @Sendable (Int) async -> Void,
    onAPNsRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void,
    onFCMRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void,
    onRunning: @escaping @Sendable (Int) async -> Void
) async throws -> some ApplicationProtocol {
    // Every rule of the settings, before anything is opened: `check-config` runs the same.
    try StartChecks(config: config, server: server, environment: ProcessInfo.processInfo.environment).log(to: logger)
    let config = {
        var served = config
        served.mediaRoot = nil
        return served
    }()  // the hook never reads local files
    // The fleet's database (--fleet-db): a wrong address, user, password, server or version of
    // its tables stops the start; a database that is only down does not (the node shares its
    // jobs per node until it is back).
    // Which work begins a recorded trace, decided in one place for the hook, the relays and the fleet.
    let sampler = server.tracing.makeSampler()
    let fleet = try await openFleet(config: config, sampler: sampler, logger: logger)
    let publicMediaBase =
        baseURLGiven && config.baseURLIsTheBucket
        ? (config.baseURL.hasSuffix("/") ? String(config.baseURL.dropLast()) : config.baseURL) : nil
    let parts = try ServerParts(
        config: config, server: server, upstreams: upstreams, coordinator: fleet, logger: logger, logSink: logSink,
        publicMediaBase: publicMediaBase, sampler: sampler)
    try await parts.pipeline.verifyStore()
    let router = buildRouter(parts)
    let host = server.host
    let retention = server.gcEvery.map {
        RetentionService(
            store: parts.pipeline.store, every: $0,
            policy: RetentionPolicy(olderThan: config.gcOlderThan, maxBytes: config.gcMaxBytes),
            executor: parts.pipeline.resources.store, logger: logger)
    }
    var services: [any Service] = retention.map { [$0] } ?? []
    if let fleet {
        fleet.attach(metrics: parts.metrics.factory) { [store = parts.pipeline.store] key in store.forget(key: key) }
        parts.metrics.onRead.withLock { $0.append { fleet.refreshQueueDepth() } }
        services.append(fleet)
        if server.fleetWorker > 0 {
            services.append(
                FleetWorkerService(
                    fleet: fleet, pipeline: parts.pipeline, concurrency: server.fleetWorker, logger: logger))
        }
    }
    // What SIGHUP reloads: add a `Reloadable` here to make another part reloadable.
    var reloadable: [any Reloadable] = server.credentials.path != nil ? [parts.credentials] : []
    if let settings {
        reloadable.append(
            SettingsReload(
                start: settings.start, read: settings.read, live: parts.live, sink: logSink, logger: logger))
    }
    if !reloadable.isEmpty {
        services.append(
            ReloadService(items: reloadable, executor: parts.pipeline.resources.housekeeping, logger: logger))
    }
    if server.relays.running {
        // First of the services, so the last to stop: after the relays that use them.
        services.insert(CredentialsService(credentials: parts.credentials), at: 0)
    }
    if let exportURL = server.tracing.exportURL {
        // First of all, so the last to stop: it flushes the spans the others ended.
        let tracing = try TracingBackend(
            config: server.tracing, exportURL: exportURL, factory: parts.metrics.factory, logger: logger)
        services.insert(tracing.service, at: 0)
        logger.info(
            "traces", metadata: ["endpoint": "\(exportURL)", "sampler": "\(server.tracing.sampler.rawValue)"])
    }
    if server.fcm.port != nil {
        // FCM's HTTP v1 API on its own listener (its Authorization belongs to Google).
        services.append(
            try server.relays.service(
                .fcm, parts: parts.relay, logger: logger,
                onRunning: relayRunning(
                    .fcm, server.fcm.host, server.fcm.upstreamEndpoint, logger: logger, then: onFCMRunning)))
    }
    if server.apns.port != nil {
        // Apple's provider API on its own listener, over the same pipeline, memo and metrics.
        let auth = parts.credentials.holdsAPNs ? "held credentials" : "pass-through"
        let apns = try server.relays.service(
            .apns, parts: parts.relay, logger: logger,
            onRunning: relayRunning(
                .apns, server.apns.host, server.apns.upstreamEndpoint, ["auth": "\(auth)"], logger: logger,
                then: onAPNsRunning))
        let credentials = parts.credentials
        parts.metrics.apnsConnections.withLock { $0 = { apns.upstreamConnections + credentials.connectionCount } }
        services.append(apns)
    }
    if let metricsPort = server.metricsPort {
        // /metrics alone, without auth, on its own address (as image proxies do): for a
        // Prometheus on the internal network, with the hook's own port public.
        let scrapeRouter = Router()
        scrapeRouter.get("metrics") { [metrics = parts.metrics] _, _ in
            HealthRoutes<AppRequestContext>.exposition(metrics)
        }
        let metricsHost = server.metricsHost
        services.append(
            Application(
                router: scrapeRouter,
                configuration: .init(
                    address: .hostname(metricsHost, port: metricsPort),
                    serverName: "PushMedia/\(PushMediaVersion.string)"),
                onServerRunning: { channel in
                    let port = channel.localAddress?.port ?? metricsPort
                    logger.info("metrics listening", metadata: ["address": "\(metricsHost):\(port)"])
                    await onMetricsRunning(port)
                },
                logger: logger))
    }
    return Application(
        router: router,
        configuration: .init(
            address: .hostname(host, port: server.port), serverName: "PushMedia/\(PushMediaVersion.string)"),
        services: services,
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? server.port
            if !baseURLGiven {
                let shown = reachableAddress(of: host)
                parts.baseURL.withLock { $0 = "http://\(shown.contains(":") ? "[\(shown)]" : shown):\(port)/media" }
            }
            logger.info(
                "listening",
                metadata: [
                    "address": "\(host):\(port)", "media": "\(parts.baseURL.withLock { $0 })",
                    "store": "\(parts.pipeline.store.location)",
                    "auth": "\(server.tokens.isEmpty && server.hmacSecret == nil ? "none" : "required")",
                ])
            await onRunning(port)
        },
        logger: logger
    )
}

/// What a relay does once it listens: says so in the log (its address, TLS, upstream and
/// `extra`), then `then`.
private func relayRunning(
    _ name: RelayName, _ host: String, _ upstream: UpstreamEndpoint, _ extra: Logger.Metadata = [:], logger: Logger,
    then: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
) -> @Sendable (_ port: Int, _ tls: Bool) async -> Void {
    let authority = upstream.authority
    return { port, tls in
        logger.info(
            "\(name.rawValue) relay listening",
            metadata: ["address": "\(host):\(port)", "tls": "\(tls)", "upstream": "\(authority)"].merging(extra) { $1 }
        )
        await then(port, tls)
    }
}
