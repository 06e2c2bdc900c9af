import ArgumentParser
import Foundation
import Logging
import PushMedia
import PushMediaFleet
import PushMediaRelay
import PushMediaServer
import ServiceLifecycle

struct ServeCommand: AsyncParsableCommand, SettingFlags {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract:
            "Run the HTTP hook: POST /v1/process and /v1/batch, GET /media/<name>, /preview, /healthz, /readyz, "
            + "/metrics; media URLs with --url-key or --url-allow-source; and, with --apns-port and --fcm-port, the "
            + "APNs and FCM relays.",
        discussion: """
            Listens on 127.0.0.1:8080 by default. A non-loopback address needs --token or --hmac-secret \
            (or --insecure-no-auth). /preview, a page that shows a payload as notifications, is on \
            when no auth is configured, otherwise only with --preview. Stops gracefully on SIGTERM or SIGINT: no new connections, \
            requests in flight finish within their budgets. SIGHUP reads the settings file again (applying \
            the settings whose help says so) and the --relay-credentials file.
            """
    )

    @Option(help: .setting("host"))
    var host: String?
    @Option(help: .setting("port"))
    var port: String?
    @Option(name: .customLong("metrics-port"), help: .setting("metrics-port"))
    var metricsPort: String?
    @Option(name: .customLong("metrics-host"), help: .setting("metrics-host"))
    var metricsHost: String?
    @Option(name: .customLong("token"), help: .setting("token"))
    var token: [String] = []
    @Option(name: .customLong("hmac-secret"), help: .setting("hmac-secret"))
    var hmacSecret: String?
    @Flag(name: .customLong("insecure-no-auth"), help: .setting("insecure-no-auth"))
    var insecureNoAuth = false
    @Flag(name: .customLong("preview"), help: .setting("preview"))
    var preview = false
    @Option(name: .customLong("log-format"), help: .setting("log-format"))
    var logFormat: String?
    @Option(name: .customLong("log-level"), help: .setting("log-level"))
    var logLevel: String?
    @Option(name: .customLong("max-jobs"), help: .setting("max-jobs"))
    var maxJobs: String?
    @Option(name: .customLong("max-queue"), help: .setting("max-queue"))
    var maxQueue: String?
    @Option(name: .customLong("background-limit"), help: .setting("background-limit"))
    var backgroundLimit: String?
    @Option(name: .customLong("gc-every"), help: .setting("gc-every"))
    var gcEvery: String?
    @Option(name: .customLong("older-than"), help: .setting("older-than"))
    var olderThan: String?
    @Option(name: .customLong("max-bytes"), help: .setting("max-bytes"))
    var maxBytes: String?
    @Option(name: .customLong("media-memory"), help: .setting("media-memory"))
    var mediaMemory: String?
    @Option(name: .customLong("memo-bytes"), help: .setting("memo-bytes"))
    var memoBytes: String?
    @Option(name: .customLong("media-wait"), help: .setting("media-wait"))
    var mediaWait: String?
    @Option(name: .customLong("drain-limit"), help: .setting("drain-limit"))
    var drainLimit: String?
    @Option(name: .customLong("min-free-space"), help: .setting("min-free-space"))
    var minFreeSpace: String?
    @Option(name: .customLong("fleet-worker"), help: .setting("fleet-worker"))
    var fleetWorker: String?
    @Option(name: .customLong("url-key"), help: .setting("url-key"))
    var urlKey: [String] = []
    @Option(name: .customLong("url-salt"), help: .setting("url-salt"))
    var urlSalt: [String] = []
    @Option(name: .customLong("url-allow-source"), help: .setting("url-allow-source"))
    var urlAllowSource: [String] = []
    @Option(name: .customLong("url-budget"), help: .setting("url-budget"))
    var urlBudget: String?
    @Option(name: .customLong("apns-port"), help: .setting("apns-port"))
    var apnsPort: String?
    @Option(name: .customLong("apns-host"), help: .setting("apns-host"))
    var apnsHost: String?
    @Option(name: .customLong("apns-tls-cert"), help: .setting("apns-tls-cert"))
    var apnsTLSCert: String?
    @Option(name: .customLong("apns-tls-key"), help: .setting("apns-tls-key"))
    var apnsTLSKey: String?
    @Option(name: .customLong("apns-client-ca"), help: .setting("apns-client-ca"))
    var apnsClientCA: String?
    @Option(name: .customLong("apns-allow-team"), help: .setting("apns-allow-team"))
    var apnsAllowTeam: [String] = []
    @Option(name: .customLong("apns-upstream"), help: .setting("apns-upstream"))
    var apnsUpstream: String?
    @Option(name: .customLong("apns-upstream-ca"), help: .setting("apns-upstream-ca"))
    var apnsUpstreamCA: String?
    @Option(name: .customLong("apns-key"), help: .setting("apns-key"))
    var apnsKey: String?
    @Option(name: .customLong("apns-key-id"), help: .setting("apns-key-id"))
    var apnsKeyID: String?
    @Option(name: .customLong("apns-team-id"), help: .setting("apns-team-id"))
    var apnsTeamID: String?
    @Option(name: .customLong("apns-budget"), help: .setting("apns-budget"))
    var apnsBudget: String?
    @Option(name: .customLong("apns-upstream-timeout"), help: .setting("apns-upstream-timeout"))
    var apnsUpstreamTimeout: String?
    @Option(name: .customLong("fcm-port"), help: .setting("fcm-port"))
    var fcmPort: String?
    @Option(name: .customLong("fcm-host"), help: .setting("fcm-host"))
    var fcmHost: String?
    @Option(name: .customLong("fcm-tls-cert"), help: .setting("fcm-tls-cert"))
    var fcmTLSCert: String?
    @Option(name: .customLong("fcm-tls-key"), help: .setting("fcm-tls-key"))
    var fcmTLSKey: String?
    @Option(name: .customLong("fcm-client-ca"), help: .setting("fcm-client-ca"))
    var fcmClientCA: String?
    @Option(name: .customLong("fcm-allow-project"), help: .setting("fcm-allow-project"))
    var fcmAllowProject: [String] = []
    @Option(name: .customLong("fcm-upstream"), help: .setting("fcm-upstream"))
    var fcmUpstream: String?
    @Option(name: .customLong("fcm-upstream-ca"), help: .setting("fcm-upstream-ca"))
    var fcmUpstreamCA: String?
    @Option(name: .customLong("fcm-budget"), help: .setting("fcm-budget"))
    var fcmBudget: String?
    @Option(name: .customLong("fcm-upstream-timeout"), help: .setting("fcm-upstream-timeout"))
    var fcmUpstreamTimeout: String?
    @Option(name: .customLong("relay-credentials"), help: .setting("relay-credentials"))
    var relayCredentials: String?
    @Flag(name: .customLong("relay-pass-through"), help: .setting("relay-pass-through"))
    var relayPassThrough = false
    @Option(name: .customLong("relay-max-connections"), help: .setting("relay-max-connections"))
    var relayMaxConnections: String?
    @Option(name: .customLong("relay-max-streams"), help: .setting("relay-max-streams"))
    var relayMaxStreams: String?
    @Option(name: .customLong("relay-max-buffered"), help: .setting("relay-max-buffered"))
    var relayMaxBuffered: String?
    @Option(name: .customLong("relay-connection-streams"), help: .setting("relay-connection-streams"))
    var relayConnectionStreams: String?
    @Option(name: .customLong("relay-connection-bytes"), help: .setting("relay-connection-bytes"))
    var relayConnectionBytes: String?
    @Option(name: .customLong("relay-unread-timeout"), help: .setting("relay-unread-timeout"))
    var relayUnreadTimeout: String?
    @Option(name: .customLong("relay-max-body"), help: .setting("relay-max-body"))
    var relayMaxBody: String?
    @Option(name: .customLong("relay-max-header-list"), help: .setting("relay-max-header-list"))
    var relayMaxHeaderList: String?
    @Option(name: .customLong("relay-stream-window"), help: .setting("relay-stream-window"))
    var relayStreamWindow: String?
    @Option(name: .customLong("relay-connection-window"), help: .setting("relay-connection-window"))
    var relayConnectionWindow: String?
    @Option(name: .customLong("relay-max-empty-data"), help: .setting("relay-max-empty-data"))
    var relayMaxEmptyData: String?
    @Option(name: .customLong("relay-handshake-timeout"), help: .setting("relay-handshake-timeout"))
    var relayHandshakeTimeout: String?
    @Option(name: .customLong("relay-request-timeout"), help: .setting("relay-request-timeout"))
    var relayRequestTimeout: String?
    @Option(name: .customLong("relay-idle-timeout"), help: .setting("relay-idle-timeout"))
    var relayIdleTimeout: String?
    @Option(name: .customLong("relay-drain-timeout"), help: .setting("relay-drain-timeout"))
    var relayDrainTimeout: String?
    @Option(name: .customLong("relay-upstream-window"), help: .setting("relay-upstream-window"))
    var relayUpstreamWindow: String?
    @Option(name: .customLong("relay-upstream-ping"), help: .setting("relay-upstream-ping"))
    var relayUpstreamPing: String?
    @Option(name: .customLong("relay-fair-quantum"), help: .setting("relay-fair-quantum"))
    var relayFairQuantum: String?
    @OptionGroup var tracing: TracingOptions
    @Flag(name: .customLong("otel-origin-traceparent"), help: .setting("otel-origin-traceparent"))
    var otelOriginTraceparent = false
    @OptionGroup var fleet: FleetOptions
    @OptionGroup var options: SharedOptions

    /// As many open files as the system lets this process have: every client connection and every
    /// object-store transfer holds a descriptor, and a campaign's burst can hold thousands.
    static func raiseOpenFileLimit() {
        #if os(Linux)
            var limit = rlimit()
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
            guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(resource, &limit)
        #endif
    }

    /// The settings as their sources give them: the settings file (read again on SIGHUP), then
    /// the environment and the flags the process started with; and each setting's texts.
    static func snapshot(flags: [(String, String)], configFile: String?, environment: [String: String])
        throws(ConfigError) -> SettingsSnapshot
    {
        let file = try configFile.map(SettingsFile.read)
        var library = try PushMediaConfig.fromSources(file: file, environment: environment)
        var server = try ServerConfig.fromSources(file: file, environment: environment)
        for (name, text) in flags {
            if PushMediaConfig.setting(named: name) != nil {
                try library.set(name, to: text)
            } else {
                try server.set(name, to: text)
            }
        }
        var texts: [String: [String]] = [:]
        for (name, text) in file?.entries ?? [] { texts[name, default: []].append(text) }
        let variables =
            PushMediaConfig.settings.map { ($0.name, $0.environment) }
            + ServerConfig.settings.map { ($0.name, $0.environment) }
        for (name, variable) in variables { if let text = environment[variable] { texts[name] = [text] } }
        var flagged: [String: [String]] = [:]
        for (name, text) in flags { flagged[name, default: []].append(text) }
        texts.merge(flagged) { _, flags in flags }
        return SettingsSnapshot(library: library, server: server, texts: texts)
    }

    /// A start the settings refuse: each problem, as `check-config` says it, and exit 64.
    static func refused(_ error: any Error) -> ExitCode {
        for line in StartChecks.lines(of: error) { FileHandle.writeError("pushmedia: \(line)") }
        return Exit.usage
    }

    func run() async throws {
        Self.raiseOpenFileLimit()
        let environment = ProcessInfo.processInfo.environment
        let flags = (options.given + fleet.given + tracing.given + given).compactMap { name, text in
            text.map { (name, $0) }
        }
        let configFile = options.configFile ?? environment["PUSHMEDIA_CONFIG"]
        let start: SettingsSnapshot
        do { start = try Self.snapshot(flags: flags, configFile: configFile, environment: environment) } catch {
            throw ValidationError(error.description)
        }
        let (config, server) = (start.library, start.server)

        // With traces on, each line written inside a span carries its trace_id and span_id.
        let sink = LogSink(
            format: LogSink.Format(rawValue: server.logFormat) ?? .text, level: server.logLevel,
            traceIDs: server.tracing.logIDs)
        defer { sink.close() }
        LoggingSystem.bootstrap { label in SinkLogHandler(label: label, sink: sink) }
        let logger = Logger(label: "pushmedia")
        let baseURLGiven = options.baseURL != nil || environment["PUSHMEDIA_BASE_URL"] != nil
        let app: any Service
        do {
            let host = server.host
            let metricsHost = server.metricsHost
            app =
                try await buildApplication(
                    config: config, server: server, baseURLGiven: baseURLGiven, logger: logger, logSink: sink,
                    settings: (
                        start,
                        { try Self.snapshot(flags: flags, configFile: configFile, environment: environment) }
                    ),
                    onMetricsRunning: { port in
                        let line = "PushMedia metrics on http://\(metricsHost):\(port)/metrics\n"
                        FileHandle.standardOutput.write(Data(line.utf8))
                    },
                    onRelayRunning: { relay in
                        FileHandle.standardOutput.write(Data("PushMedia \(relay.title) relay on \(relay.url)\n".utf8))
                    },
                    onRunning: { port in
                        FileHandle.standardOutput.write(Data("PushMedia listening on http://\(host):\(port)\n".utf8))
                    }
                ) as any Service
        } catch let error as ServerError {
            throw Self.refused(error)
        } catch let error as ExposureError {
            throw Self.refused(error)
        } catch let error as RelaySetupError {
            throw Self.refused(error)
        } catch let error as FleetError {
            throw Self.refused(error)
        } catch let error as CredentialsError {
            throw Self.refused(error)
        } catch {
            FileHandle.writeError("pushmedia: \(error)")
            throw Exit.ioError
        }
        var group = ServiceGroupConfiguration(
            services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // Past the drain limit the requests still in flight are cancelled: an object store's
        // transfers end with them, and the process exits.
        group.maximumGracefulShutdownDuration = server.drainLimit
        do {
            try await ServiceGroup(configuration: group).run()
        } catch {
            // A listener that cannot bind: which address, and why, in plain words.
            guard let why = ListenFailure.describe(error, server: server) else { throw error }
            FileHandle.writeError("pushmedia: \(why)")
            throw Exit.ioError
        }
    }
}
