import ArgumentParser
import Foundation
import Logging
import PushMedia
import PushMediaServer
import ServiceLifecycle

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP hook: POST /v1/process and /v1/batch, GET /media/<name>, /preview, /healthz, /readyz, /metrics.",
        discussion: """
            Listens on 127.0.0.1:8080 by default. A non-loopback address needs --token or --hmac-secret \
            (or --insecure-no-auth). /preview, a page that shows a payload as notifications, is on \
            when no auth is configured, otherwise only with --preview. Stops gracefully on SIGTERM or SIGINT: no new connections, \
            requests in flight finish within their budgets.
            """
    )

    @Option(help: "Address to listen on (env PUSHMEDIA_HOST; default 127.0.0.1).")
    var host: String?
    @Option(help: "Port to listen on, 0 for any free one (env PUSHMEDIA_PORT; default 8080).")
    var port: String?
    @Option(name: .customLong("metrics-port"), help: "Serve /metrics on this port instead, without auth; 0 for any free one (env PUSHMEDIA_METRICS_PORT; default: beside /v1, with its auth).")
    var metricsPort: String?
    @Option(name: .customLong("metrics-host"), help: "Address of the --metrics-port listener; keep it internal (env PUSHMEDIA_METRICS_HOST; default 127.0.0.1).")
    var metricsHost: String?
    @Option(name: .customLong("token"), help: "Bearer token accepted on /v1/*; repeatable (env PUSHMEDIA_TOKENS, comma-separated).")
    var tokens: [String] = []
    @Option(name: .customLong("hmac-secret"), help: "Accept requests signed with this secret (env PUSHMEDIA_HMAC_SECRET).")
    var hmacSecret: String?
    @Flag(name: .customLong("insecure-no-auth"), help: "Allow a non-loopback address without auth (env PUSHMEDIA_INSECURE_NO_AUTH).")
    var insecureNoAuth = false
    @Flag(name: .customLong("preview"), help: "Serve the /preview page although --token or --hmac-secret is set; it takes no auth (env PUSHMEDIA_PREVIEW).")
    var preview = false
    @Option(name: .customLong("log-format"), help: "text or json (env PUSHMEDIA_LOG_FORMAT; default text).")
    var logFormat: String?
    @Option(name: .customLong("max-jobs"), help: "Jobs running at once (env PUSHMEDIA_MAX_JOBS; default 2 per core).")
    var maxJobs: String?
    @Option(name: .customLong("max-queue"), help: "Jobs waiting for a slot before answers are 'overloaded' (env PUSHMEDIA_MAX_QUEUE; default 64).")
    var maxQueue: String?
    @Option(name: .customLong("background-limit"), help: "How long a job may go on after its budget to fill the cache (env PUSHMEDIA_BACKGROUND_LIMIT; default 60s).")
    var backgroundLimit: String?
    @Option(name: .customLong("gc-every"), help: "Run retention (as `pushmedia gc`) this often, e.g. 1h (env PUSHMEDIA_GC_EVERY; default never).")
    var gcEvery: String?
    @Option(name: .customLong("older-than"), help: "With --gc-every: remove cache entries unused this long (env PUSHMEDIA_GC_OLDER_THAN; default 30d).")
    var olderThan: String?
    @Option(name: .customLong("max-bytes"), help: "With --gc-every: keep the store's media under this many bytes, least recently used out first (env PUSHMEDIA_GC_MAX_BYTES).")
    var maxBytes: String?
    @Option(name: .customLong("media-memory"), help: "Bytes of recently served media /media keeps in memory, local store (env PUSHMEDIA_MEDIA_MEMORY; default 64000000, 0 = off).")
    var mediaMemory: String?
    @Option(name: .customLong("min-free-space"), help: "/readyz is not ready while the download disk has less free space, in bytes (env PUSHMEDIA_MIN_FREE_SPACE; default 256000000, 0 = off).")
    var minFreeSpace: String?
    @OptionGroup var options: SharedOptions

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        var config = try options.config(environment: environment)
        config.maxJobs = config.maxJobs ?? ProcessInfo.processInfo.activeProcessorCount * 2
        if environment["PUSHMEDIA_BACKGROUND_LIMIT"] == nil { config.backgroundLimit = .seconds(60) }
        let flags: [(String, String?)] = [("host", host), ("port", port), ("metrics-host", metricsHost), ("metrics-port", metricsPort), ("hmac-secret", hmacSecret), ("log-format", logFormat),
                                          ("max-jobs", maxJobs), ("max-queue", maxQueue), ("background-limit", backgroundLimit),
                                          ("gc-every", gcEvery), ("older-than", olderThan), ("max-bytes", maxBytes),
                                          ("media-memory", mediaMemory), ("min-free-space", minFreeSpace)]
        do { try config.apply(flags + tokens.map { ("token", $0) }) } catch { throw ValidationError(error.description) }
        if insecureNoAuth { config.insecureNoAuth = true }
        if preview { config.preview = true }

        let format = config.logFormat
        LoggingSystem.bootstrap { label in
            format == "json" ? JSONLogHandler(label: label) as any LogHandler : StreamLogHandler.standardError(label: label)
        }
        let logger = Logger(label: "pushmedia")
        let baseURLGiven = options.baseURL != nil || environment["PUSHMEDIA_BASE_URL"] != nil
        let app: any Service
        do {
            let host = config.host
            let metricsHost = config.metricsHost
            app = try await buildApplication(config: config, baseURLGiven: baseURLGiven, logger: logger, onMetricsRunning: { port in
                FileHandle.standardOutput.write(Data("PushMedia metrics on http://\(metricsHost):\(port)/metrics\n".utf8))
            }) { port in
                FileHandle.standardOutput.write(Data("PushMedia listening on http://\(host):\(port)\n".utf8))
            } as any Service
        } catch let error as ServerError {
            FileHandle.writeError("pushmedia: \(error)")
            throw Exit.usage
        } catch {
            FileHandle.writeError("pushmedia: \(error)")
            throw Exit.ioError
        }
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
