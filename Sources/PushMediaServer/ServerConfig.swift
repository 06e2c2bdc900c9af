import Foundation
import Logging
import PushMedia
import PushMediaRelay

/// The settings of `pushmedia serve` that the library does not read: listeners, auth, logs, the
/// media memory, the readiness check, retention's schedule and the request limits. `settings`
/// declares each one's flag, `PUSHMEDIA_*` variable, documented default and help.
public struct ServerConfig: Configurable, Equatable {
    /// `--host`, `PUSHMEDIA_HOST`: address the HTTP hook listens on.
    public var host = "127.0.0.1"
    /// `--port`, `PUSHMEDIA_PORT`: port of the HTTP hook (0 picks a free one).
    public var port = 8080
    /// `--metrics-port`, `PUSHMEDIA_METRICS_PORT`: serve `/metrics` on its own listener, without
    /// auth, instead of beside `/v1` (0 picks a free one); nil (the default): beside `/v1`, with
    /// the same credentials.
    public var metricsPort: Int?
    /// `--metrics-host`, `PUSHMEDIA_METRICS_HOST`: address of that listener: 127.0.0.1. Give it an
    /// internal address only: it takes no credentials.
    public var metricsHost = "127.0.0.1"
    /// `--token` (repeatable), `PUSHMEDIA_TOKENS` (comma-separated): bearer tokens accepted on `/v1/*`.
    public var tokens: [String] = []
    /// `--hmac-secret`, `PUSHMEDIA_HMAC_SECRET`: accept requests signed with
    /// `X-PushMedia-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`.
    public var hmacSecret: String?
    /// `--insecure-no-auth`, `PUSHMEDIA_INSECURE_NO_AUTH`: allow listening on a non-loopback address
    /// without auth.
    public var insecureNoAuth = false
    /// `--preview`, `PUSHMEDIA_PREVIEW`: serve the `/preview` page (a form that shows a payload as
    /// notification cards) although `tokens` or `hmacSecret` are set. A browser form cannot send a
    /// token, so the page is not behind auth: without auth configured it is always on (loopback
    /// development); with auth it is off unless this is set. See `previewEnabled`.
    public var preview = false
    /// `--log-format`, `PUSHMEDIA_LOG_FORMAT`: `text` or `json` (one object per line).
    public var logFormat = "text"
    /// `--log-level`, `PUSHMEDIA_LOG_LEVEL`: the least severe level logged: info.
    public var logLevel = Logger.Level.info
    /// `--media-memory`, `PUSHMEDIA_MEDIA_MEMORY`: bytes of a local store's recently served media
    /// that `GET /media` keeps in memory (files up to 4 MB; 0 = read every answer from disk): 64 MB.
    public var mediaMemory: Int64 = 64_000_000
    /// `--min-free-space`, `PUSHMEDIA_MIN_FREE_SPACE`: `/readyz` answers not ready while the
    /// local disk that downloads are written to (a local store's folder, or `--work-dir`) has
    /// less free space than this: 256 MB (0 = no check). A full disk would make every job a
    /// best attempt (`store_unavailable`); a load balancer then sends the work elsewhere.
    public var minFreeSpace: Int64 = 256_000_000
    /// `--gc-every`, `PUSHMEDIA_GC_EVERY`: run retention this often (nil, the default: never; run
    /// `pushmedia gc` from cron, or use bucket lifecycle rules). `PushMediaConfig.gcOlderThan`
    /// and `gcMaxBytes` say what it removes.
    public var gcEvery: Duration?
    /// `--memo-bytes`, `PUSHMEDIA_MEMO_BYTES`: bytes of ready answers to repeated `/v1/process`
    /// bodies and relayed pushes kept in memory (`RepeatAnswers`): 32 MiB; 0 keeps none, nor a
    /// media URL's answer for a second (`MediaURLPaths`).
    public var memoBytes = 32 * 1024 * 1024
    /// `--fleet-worker`, `PUSHMEDIA_FLEET_WORKER`: items of the fleet's batches (`batch --fleet`)
    /// this node works at once in the background, as `pushmedia work` does, oldest batch first,
    /// starting one only while no request waits for a job: 0 (none). Needs `--fleet-db`.
    public var fleetWorker = 0
    /// `--media-wait`, `PUSHMEDIA_MEDIA_WAIT`: how long `/media` and media URLs wait for an object
    /// store to start sending a stored file: 5 s. Then the answer is a redirect to the file at
    /// `--base-url` when that is the bucket itself, else 503.
    public var mediaWait: Duration = .seconds(5)
    /// `--drain-limit`, `PUSHMEDIA_DRAIN_LIMIT`: on SIGTERM or SIGINT, how long the requests in
    /// flight may go on (no new ones are taken) before they are cut and the process exits: 15 s.
    public var drainLimit: Duration = .seconds(15)
    /// Largest `/v1/process` body: 64 KiB.
    public var maxPayloadBodyBytes = 64 * 1024
    /// Largest `/v1/batch` body: 4 MiB.
    public var maxBatchBodyBytes = 4 * 1024 * 1024
    /// Most payloads in a `/v1/batch` body: 500.
    public var maxBatchPayloads = 500
    /// Media URLs (`--url-*`); off unless a key or an allow-listed source is given.
    public var urls = MediaURLConfig()
    /// The relays (`--apns-*`, `--fcm-*`, `--relay-*`), each off unless its port is set.
    public var relays = RelaysConfig()
    /// OpenTelemetry traces (`--otel-*`), off unless an endpoint is given.
    public var tracing = TracingConfig()

    public init() {}

    /// The APNs relay's settings, of `relays`.
    public var apns: APNsRelayConfig {
        get { relays.apns }
        set { relays.apns = newValue }
    }
    /// The FCM relay's settings, of `relays`.
    public var fcm: FCMRelayConfig {
        get { relays.fcm }
        set { relays.fcm = newValue }
    }
    /// The relays' held credentials, of `relays`.
    public var credentials: RelayCredentialsConfig {
        get { relays.credentials }
        set { relays.credentials = newValue }
    }
    /// The relays' bounds, of `relays`.
    public var relay: RelayLimits {
        get { relays.limits }
        set { relays.limits = newValue }
    }

    /// Whether `/preview` is answered: when no auth is configured, or with `--preview`.
    public var previewEnabled: Bool { preview || (tokens.isEmpty && hmacSecret == nil) }

    /// Jobs running at once when `--max-jobs` is not given: 2 per core, and never fewer than a
    /// template's pages (`Templates.maximumPages`), so every image of one carousel is fetched at
    /// once on any machine. The CPU they share is bounded apart (one libvips thread per core,
    /// `--decode-memory`), so more jobs than cores wait for CPU, not memory.
    public static var defaultMaxJobs: Int {
        max(ProcessInfo.processInfo.activeProcessorCount * 2, Templates.maximumPages)
    }
    /// How long a job may go on after its budget when `--background-limit` is not given: 60 s.
    public static let defaultBackgroundLimit: Duration = .seconds(60)

    /// `config` with the server's defaults for the library settings it gives its own default
    /// (`max-jobs`, `background-limit`) where they were not given.
    public static func served(_ config: PushMediaConfig) -> PushMediaConfig {
        var served = config
        if served.maxJobs == nil { served.maxJobs = defaultMaxJobs }
        if served.givenBackgroundLimit == nil { served.backgroundLimit = defaultBackgroundLimit }
        return served
    }

    /// Every server setting (all taken by `serve` only), media URLs', the relays' and the traces'
    /// last; see `Setting`.
    public static let settings: [Setting<ServerConfig>] =
        hook + MediaURLConfig.settings + RelaysConfig.settings.map { $0.lifted(to: \.relays) } + TracingConfig.settings

    /// The hook's own settings.
    static let hook: [Setting<ServerConfig>] = [
        .address("host", "PUSHMEDIA_HOST", \.host, help: "Address to listen on"),
        .integer(
            "port", "PUSHMEDIA_PORT", \.port, in: 0...65535, commands: [.serve],
            help: "Port to listen on, 0 for any free one"),
        .integer(
            "metrics-port", "PUSHMEDIA_METRICS_PORT", \.metricsPort, in: 0...65535, commands: [.serve],
            default: "none",
            help: "Serve /metrics on this port instead, without auth; 0 for any free one; none: beside /v1, "
                + "with its auth"),
        .address(
            "metrics-host", "PUSHMEDIA_METRICS_HOST", \.metricsHost, example: "10.0.0.5",
            help: "Address of the --metrics-port listener; keep it internal"),
        Setting(
            "token", "PUSHMEDIA_TOKENS", .list, commands: [.serve], default: "none",
            help: "Bearer token accepted on /v1/*; repeatable"
        ) {
            config, value throws(ConfigError) in
            config.tokens += value.items
        }.reloadedOnSIGHUP(),
        Setting(
            "hmac-secret", "PUSHMEDIA_HMAC_SECRET", commands: [.serve], default: "none",
            help: "Accept requests signed with this secret, at least 16 bytes"
        ) {
            config, value throws(ConfigError) in
            guard value.text.utf8.count >= 16 else {
                throw value.invalid(expected: "a secret of at least 16 bytes", shown: "(hidden)")
            }
            config.hmacSecret = value.text
        }.reloadedOnSIGHUP(),
        .flag(
            "insecure-no-auth", "PUSHMEDIA_INSECURE_NO_AUTH", \.insecureNoAuth, commands: [.serve],
            help: "Allow a non-loopback address without auth"),
        Setting(
            "log-format", "PUSHMEDIA_LOG_FORMAT", commands: [.serve], default: "`text`",
            help: "text or json"
        ) {
            config, value throws(ConfigError) in
            guard ["text", "json"].contains(value.text) else { throw value.invalid(expected: "text or json") }
            config.logFormat = value.text
        },
        Setting(
            "log-level", "PUSHMEDIA_LOG_LEVEL", commands: [.serve], default: "`info`",
            help: "Least severe level logged: trace, debug, info, notice, warning, error, critical"
        ) {
            config, value throws(ConfigError) in
            guard let level = Logger.Level(rawValue: value.text.lowercased()) else {
                throw value.invalid(expected: Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))
            }
            config.logLevel = level
        }.reloadedOnSIGHUP(),
        .flag(
            "preview", "PUSHMEDIA_PREVIEW", \.preview, commands: [.serve],
            help: "Serve the /preview page although --token or --hmac-secret is set; it takes no auth"),
        Setting(
            "gc-every", "PUSHMEDIA_GC_EVERY", commands: [.serve], default: "never",
            help: "Run retention (as `pushmedia gc`) this often, e.g. 1h"
        ) {
            config, value throws(ConfigError) in
            config.gcEvery = try value.ageOfMinutes()
        },
        .integer(
            "media-memory", "PUSHMEDIA_MEDIA_MEMORY", \.mediaMemory, in: 0...1_000_000_000_000, commands: [.serve],
            help: "Bytes of recently served media /media keeps in memory, local store; 0 = off"),
        .integer(
            "memo-bytes", "PUSHMEDIA_MEMO_BYTES", \.memoBytes, in: 0...64_000_000_000, commands: [.serve],
            help:
                "Bytes of ready answers to repeated bodies (/v1/process, relayed pushes) kept in memory; 0 = none, "
                + "nor media URLs' answers (kept a second)"),
        .duration(
            "media-wait", "PUSHMEDIA_MEDIA_WAIT", \.mediaWait, commands: [.serve],
            help: "How long /media and media URLs wait for an object store to start sending a file; then a redirect "
                + "to it at --base-url when that is the bucket itself, else 503"),
        .duration(
            "drain-limit", "PUSHMEDIA_DRAIN_LIMIT", \.drainLimit, commands: [.serve],
            help:
                "On SIGTERM or SIGINT, how long requests in flight may go on before they are cut and the process exits"
        ),
        .integer(
            "fleet-worker", "PUSHMEDIA_FLEET_WORKER", \.fleetWorker, in: 0...1024, commands: [.serve],
            help: "Items of the fleet's batches (batch --fleet) this node works at once in the background, oldest "
                + "batch first, starting one only while no request waits for a job; 0 = none (needs --fleet-db)"),
        .integer(
            "min-free-space", "PUSHMEDIA_MIN_FREE_SPACE", \.minFreeSpace, in: 0...1_000_000_000_000_000,
            commands: [.serve],
            help: "/readyz is not ready while the download disk has less free space, in bytes; 0 = off"),
    ]
}
