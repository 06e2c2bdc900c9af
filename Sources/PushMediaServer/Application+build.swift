import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PushMedia
import PushMediaFleet
import PushMediaRelay
import ServiceLifecycle

/// The router: `/v1/process`, `/v1/batch` and `/metrics` (authenticated when tokens or a secret are set;
/// `/metrics` is not here when `--metrics-port` gives it a listener of its own), `/media/<name>`,
/// `/preview` (see `ServerConfig.previewEnabled`), `/healthz`, `/readyz`, `/openapi.yaml`, and media
/// URLs (`/<signature>/<options>/<source>`) on every other path, when configured. `/metrics`
/// reads `readings` (the parts' own when not given: no relay's), `now` is what signed requests'
/// times are checked against, `clock` what the media URLs' kept answers age by.
public func buildRouter(
    _ parts: ServerParts, readings: MetricsReadings? = nil, now: @escaping @Sendable () -> Date = Date.init,
    clock: DeadlineClock = .continuous
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
        pipeline: parts.pipeline, metrics: parts.metrics, readings: readings ?? parts.readings(),
        minFreeSpace: server.minFreeSpace, executor: parts.pipeline.resources.housekeeping,
        credentials: parts.credentials
    )
    .add(to: router, metrics: scrape)
    return router
}

/// The fleet's database named by `--fleet-db`, checked; nil without one. A wrong address, user,
/// password, server or version of its tables stops the start; a database that is only down does
/// not (the node shares its jobs per node until it is back).
func checkedFleetDatabase(config: PushMediaConfig, logger: Logger) async throws -> FleetDatabase? {
    guard let database = try FleetDatabase(config: config) else { return nil }
    do {
        try await database.check(logger: logger)
    } catch {
        guard error.isOutage else { throw error }
        logger.warning(
            "fleet database unavailable at start: jobs are shared per node until it is back",
            metadata: ["database": "\(database.described)", "error": "\(error)"])
    }
    return database
}

/// The application: checks that a public listener has auth and that the store answers (an
/// object store: endpoint, credentials, bucket), derives the base URL from the bound address
/// unless `--base-url` was given, runs retention every `gcEvery` when set, opens the APNs and FCM
/// relays when `server.apns.port` / `server.fcm.port` are set (`onRelayRunning` with each one's
/// URL once it listens), and calls `onRunning` with the port. The pipeline runs with `serve`'s defaults for `max-jobs` and `background-limit`
/// unless `config` gives them (see `ServerParts.init`).
public func buildApplication(
    config: PushMediaConfig, server: ServerConfig, baseURLGiven: Bool, logger: Logger, logSink: LogSink? = nil,
    settings: (start: SettingsSnapshot, read: @Sendable () throws -> SettingsSnapshot)? = nil,
    onMetricsRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onRelayRunning: @escaping @Sendable (RelayListening) async -> Void = { _ in },
    onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    try await buildApplication(
        config: config, server: server, baseURLGiven: baseURLGiven, logger: logger, logSink: logSink,
        settings: settings, upstreams: .http2, onMetricsRunning: onMetricsRunning, onRelayRunning: onRelayRunning,
        onRunning: onRunning)
}

/// The same, with the relays' upstreams `upstreams` makes.
func buildApplication(
    config: PushMediaConfig, server: ServerConfig, baseURLGiven: Bool, logger: Logger, logSink: LogSink?,
    settings: (start: SettingsSnapshot, read: @Sendable () throws -> SettingsSnapshot)?, upstreams: UpstreamMaker,
    onMetricsRunning: @escaping @Sendable (Int) async -> Void,
    onRelayRunning: @escaping @Sendable (RelayListening) async -> Void,
    onRunning: @escaping @Sendable (Int) async -> Void
) async throws -> some ApplicationProtocol {
    // Every rule of the settings, before anything is opened: `check-config` runs the same.
    try StartChecks(config: config, server: server, environment: ProcessInfo.processInfo.environment).log(to: logger)
    let config = {
        var served = config
        served.mediaRoot = nil
        return served
    }()  // the hook never reads local files
    let fleetDatabase = try await checkedFleetDatabase(config: config, logger: logger)
    let publicMediaBase =
        baseURLGiven && config.baseURLIsTheBucket
        ? (config.baseURL.hasSuffix("/") ? String(config.baseURL.dropLast()) : config.baseURL) : nil
    let parts = try ServerParts(
        config: config, server: server, upstreams: upstreams, fleetDatabase: fleetDatabase, logger: logger,
        logSink: logSink, publicMediaBase: publicMediaBase)
    try await parts.pipeline.verifyStore()
    let host = server.host
    let retention = server.gcEvery.map {
        RetentionService(
            store: parts.pipeline.store, every: $0,
            policy: RetentionPolicy(olderThan: config.gcOlderThan, maxBytes: config.gcMaxBytes),
            executor: parts.pipeline.resources.store, logger: logger)
    }
    var services: [any Service] = retention.map { [$0] } ?? []
    if let fleet = parts.fleet {
        logger.info("fleet", metadata: ["database": "\(fleet.database.described)", "node": "\(fleet.node)"])
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
    if let tracing = parts.tracing, let exportURL = server.tracing.exportURL {
        // First of all, so the last to stop: it flushes the spans the others ended.
        services.insert(tracing.service, at: 0)
        logger.info(
            "traces", metadata: ["endpoint": "\(exportURL)", "sampler": "\(server.tracing.sampler.rawValue)"])
    }
    // Each relay on its own listener (its Authorization belongs to Apple or Google), over the
    // same pipeline, memo and metrics.
    var relays: [RelayName: any RelayServing] = [:]
    for name in RelayName.allCases {
        let listener = server.relays.listener(name)
        guard listener.port != nil else { continue }
        let relay = try server.relays.service(name, parts: parts.relay, logger: logger) { port, tls in
            await onRelayRunning(RelayListening(title: name.title, host: listener.host, port: port, tls: tls))
        }
        relays[name] = relay
        services.append(relay)
    }
    var apnsConnections: (@Sendable () -> Int)?
    if let apns = relays[.apns] { apnsConnections = { apns.upstreamConnections } }
    let readings = parts.readings(apnsConnections: apnsConnections)
    let router = buildRouter(parts, readings: readings)
    if let metricsPort = server.metricsPort {
        // /metrics alone, without auth, on its own address (as image proxies do): for a
        // Prometheus on the internal network, with the hook's own port public.
        let scrapeRouter = Router()
        scrapeRouter.get("metrics") { [metrics = parts.metrics] _, _ in
            HealthRoutes<AppRequestContext>.exposition(metrics, readings)
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

/// A relay listening: its name in messages (`APNs`, `FCM`) and where.
public struct RelayListening: Sendable {
    public let title: String
    public let host: String
    public let port: Int
    /// Whether it speaks TLS.
    public let tls: Bool

    /// `https://host:port`, or `http://` in cleartext.
    public var url: String { "\(tls ? "https" : "http")://\(host):\(port)" }
}
