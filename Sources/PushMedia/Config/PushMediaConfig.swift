import Foundation

/// What to do with the media key when the media is rejected.
public enum OnReject: String, Sendable, CaseIterable, Codable {
    /// Remove the media key so the phone shows the text at once (default).
    case drop
    /// Leave the original media reference in place.
    case keep
}

/// Every setting of PushMedia, with its default. Each is also a `PUSHMEDIA_*` environment
/// variable (see `environmentKeys`) and a command-line flag of the same name.
public struct PushMediaConfig: Sendable, Equatable {
    /// `--store`, `PUSHMEDIA_STORE`: where attachments and the cache index live: a directory
    /// (the default, `pushmedia-store`), or `s3://BUCKET[/PREFIX]` for an S3-compatible object
    /// store shared by several nodes (see the `s3*` settings).
    public var storeLocation = "pushmedia-store"
    /// `--base-url`, `PUSHMEDIA_BASE_URL`: public URL under which the store's files are served;
    /// an attachment URL is `<base-url>/<sha256>.<ext>`. The default matches `pushmedia serve`.
    public var baseURL = "http://127.0.0.1:8080/media"
    /// `--budget`, `PUSHMEDIA_BUDGET`: time allowed per payload before the best attempt is returned.
    public var budget: Duration = .seconds(10)
    /// `--allow-private-networks`, `PUSHMEDIA_ALLOW_PRIVATE_NETWORKS`: permit loopback, private,
    /// link-local and other internal addresses (off: see `AddressPolicy`).
    public var allowPrivateNetworks = false
    /// `--trust-peer`, `PUSHMEDIA_TRUSTED_PEERS` (comma-separated): exact `address:port` peers
    /// (`[v6]:port` for IPv6) that may be fetched from although internal, e.g. an origin inside the
    /// network. Checked on the resolved address like every other connection.
    public var trustedPeers: [String] = []
    /// `--media-key`, `PUSHMEDIA_MEDIA_KEYS` (comma-separated): extra top-level keys holding a media URL,
    /// searched after the built-in ones.
    public var extraMediaKeys: [String] = []
    /// `--on-reject`, `PUSHMEDIA_ON_REJECT`: `drop` (default) or `keep` the media key of rejected media.
    public var onReject: OnReject = .drop
    /// `--media-root`, `PUSHMEDIA_MEDIA_ROOT`: directory that local media references (relative
    /// paths, `file:` URLs) must resolve inside. Defaults to the payload file's directory.
    public var mediaRoot: String?
    /// `--long-edge`, `PUSHMEDIA_LONG_EDGE`: longest side of a transcoded image. 2048 px keeps the
    /// decoded bitmap at most 2048×2048×4 = 16 MiB, inside the service extension's ~24 MB memory
    /// limit, and still covers the widest expanded notification (1290 px on 3x phones).
    public var longEdge = 2048
    /// `--thumb-edge`, `PUSHMEDIA_THUMB_EDGE`: longest side of the JPEG thumbnail made of every image
    /// (0: no thumbnails).
    public var thumbnailEdge = 512
    /// `--max-pixels`, `PUSHMEDIA_MAX_PIXELS`: largest source image (width × height of a frame),
    /// read from the header before any pixel is decoded. Larger images are rejected.
    public var maxPixels: Int64 = 50_000_000
    /// `--max-frames`, `PUSHMEDIA_MAX_FRAMES`: animations with more frames (or more than
    /// `maxPixels` over all frames) are reduced to their first frame.
    public var maxFrames = 100
    /// `--decode-memory`, `PUSHMEDIA_DECODE_MEMORY`: estimated memory (bytes) of the image decodes
    /// running at once; a transcode waits until its estimate fits (one larger than this runs
    /// alone). Keeps peak memory flat whatever the concurrency: 256 MB, the smallest budget at
    /// which a 2-core batch of the benchmark corpus runs as fast as curl + vipsthumbnail (128 MB
    /// left a core idle behind every large decode; see bench/RESULTS.md).
    public var decodeMemory: Int64 = 256_000_000
    /// `--video-edge`, `PUSHMEDIA_VIDEO_EDGE`: longest side of a transcoded video: 1280.
    public var videoEdge = 1280
    /// `--clip-seconds`, `PUSHMEDIA_CLIP_SECONDS`: a transcoded video or audio that cannot fit
    /// its cap whole at a watchable bitrate is cut to its first this many seconds: 30.
    public var clipSeconds = 30
    /// `--max-source-bytes`, `PUSHMEDIA_MAX_SOURCE_BYTES`: largest download: 200 MB. Sources may
    /// exceed Apple's caps (10 MB image, 5 MB audio, 50 MB video) because they are made to fit.
    public var maxSourceBytes: Int64 = 200_000_000
    /// `--jpeg-quality`, `PUSHMEDIA_JPEG_QUALITY`: first JPEG quality tried; lowered step by step
    /// until the image fits the cap.
    public var jpegQuality = 82
    /// `--connect-timeout`, `PUSHMEDIA_CONNECT_TIMEOUT`: time to establish a connection.
    public var connectTimeout: Duration = .seconds(3)
    /// `--low-speed-time`, `PUSHMEDIA_LOW_SPEED_TIME`: abort a download slower than 1 KiB/s for this long.
    public var lowSpeedTime: Duration = .seconds(5)
    /// `--max-redirects`, `PUSHMEDIA_MAX_REDIRECTS`: redirects followed (each one checked again).
    public var maxRedirects = 5
    /// `--background-limit`, `PUSHMEDIA_BACKGROUND_LIMIT`: how long a job may keep working after its
    /// request's budget ran out, so that the cache holds the full result next time (0 = stop at the
    /// budget; `pushmedia serve` defaults to 60 s).
    public var backgroundLimit: Duration = .zero
    /// `--max-jobs`, `PUSHMEDIA_MAX_JOBS`: jobs (fetch + transcode) running at once; nil = no limit
    /// (`pushmedia serve` defaults to 2 per core).
    public var maxJobs: Int?
    /// Jobs past their fetch (sniff, decode, encode, store) at once; nil = as many as the CPU
    /// executor has threads (one per core). `pushmedia batch` sets it to `--concurrency` and keeps
    /// more payloads in flight than that, so the next items download while these transcode.
    public var maxTranscodes: Int?
    /// `--max-queue`, `PUSHMEDIA_MAX_QUEUE`: jobs waiting for a slot when `maxJobs` run; past that a
    /// payload is answered at once with `best_attempt` / `overloaded`.
    public var maxQueuedJobs = 64
    /// `--profile`, `PUSHMEDIA_PROFILE`: the platform attachments are made for, one of
    /// `PlatformProfile.profiles`: `ios` (default: Apple's caps and formats), `android`, `huawei`,
    /// `web`. An FCM message's platform parts each get their own platform's variant whatever this says.
    public var profile = PlatformProfile.ios
    /// `--vendor`, `PUSHMEDIA_VENDOR`: the payload convention to read and write (`auto`, the
    /// default, detects it by shape; or one of `Vendor`'s names, e.g. `fcm`, `onesignal`).
    public var vendor: Vendor?
    /// `--crop`, `PUSHMEDIA_CROP`: how an image is cropped to a profile's 2:1 shape and how the
    /// thumbnail's clipping rectangle is placed: `attention` (default; libvips' interest
    /// detection), `centre`, or `none` (profiles' shapes are then cropped at the centre too).
    public var crop = CropMode.attention
    /// `--thumb-aspect`, `PUSHMEDIA_THUMB_ASPECT`: width:height of the clipping rectangle
    /// emitted for the phone's thumbnail, e.g. `1:1`; nil (default, `none`) emits none.
    public var thumbnailAspect: Double?
    /// `--thumb-hidden`, `PUSHMEDIA_THUMB_HIDDEN`: tell the phone to hide the thumbnail.
    public var thumbnailHidden = false

    // The object store (`--store s3://…`).

    /// `--s3-endpoint`, `PUSHMEDIA_S3_ENDPOINT`: the S3-compatible endpoint, e.g.
    /// `https://s3.eu-west-1.amazonaws.com` or `http://127.0.0.1:9000`; path-style addressing.
    public var s3Endpoint: String?
    /// `--s3-region`, `PUSHMEDIA_S3_REGION`: the region requests are signed for.
    public var s3Region = "us-east-1"
    /// `PUSHMEDIA_S3_ACCESS_KEY_ID` or `AWS_ACCESS_KEY_ID` (environment only, never a flag).
    public var s3AccessKey: String?
    /// `PUSHMEDIA_S3_SECRET_ACCESS_KEY` or `AWS_SECRET_ACCESS_KEY` (environment only).
    public var s3SecretKey: String?
    /// `PUSHMEDIA_S3_SESSION_TOKEN` or `AWS_SESSION_TOKEN` (environment only): temporary credentials.
    public var s3SessionToken: String?
    /// `--work-dir`, `PUSHMEDIA_WORK_DIR`: local folder for downloads and intermediates when the
    /// store is an object store (a local store keeps them inside its directory).
    public var workDirectory = NSTemporaryDirectory() + "pushmedia-work"
    /// `--index-cache`, `PUSHMEDIA_INDEX_CACHE`: cache entries kept in memory (LRU) in front of the index.
    public var indexCacheEntries = 100_000
    /// `--index-cache-ttl`, `PUSHMEDIA_INDEX_CACHE_TTL`: how long an entry held in memory is used
    /// before the index is read again (another node may have renewed, refreshed or purged it): 60s.
    public var indexCacheTTL: Duration = .seconds(60)
    /// `--media-memory`, `PUSHMEDIA_MEDIA_MEMORY`: bytes of a local store's recently served media
    /// that `GET /media` keeps in memory (files up to 4 MB; 0 = read every answer from disk): 64 MB.
    public var mediaMemory: Int64 = 64_000_000
    /// `--min-free-space`, `PUSHMEDIA_MIN_FREE_SPACE`: `/readyz` answers not ready while the
    /// local disk that downloads are written to (a local store's folder, or `--work-dir`) has
    /// less free space than this: 256 MB (0 = no check). A full disk would make every job a
    /// best attempt (`store_unavailable`); a load balancer then sends the work elsewhere.
    public var minFreeSpace: Int64 = 256_000_000

    // Freshness of remote sources.

    /// `--min-ttl`, `PUSHMEDIA_MIN_TTL`: a fetched URL is reused at least this long before it is
    /// revalidated with its origin, whatever the origin says (1m).
    public var minTTL: Duration = .seconds(60)
    /// `--max-ttl`, `PUSHMEDIA_MAX_TTL`: and at most this long (1d), however long the origin's
    /// `Cache-Control: max-age` or `Expires`.
    public var maxTTL: Duration = .seconds(86_400)
    /// The freshness rule of remote sources (see `FreshnessPolicy`).
    public var freshness: FreshnessPolicy { FreshnessPolicy(minimum: minTTL, maximum: maxTTL) }

    // Retention (`pushmedia gc`, `serve --gc-every`).

    /// `--gc-every`, `PUSHMEDIA_GC_EVERY`: `pushmedia serve` runs retention this often (nil, the
    /// default: never; run `pushmedia gc` from cron, or use bucket lifecycle rules).
    public var gcEvery: Duration?
    /// `--older-than`, `PUSHMEDIA_GC_OLDER_THAN`: cache entries unused this long are removed (30d).
    public var gcOlderThan: Duration = .seconds(30 * 86_400)
    /// `--max-bytes`, `PUSHMEDIA_GC_MAX_BYTES`: also remove least recently used entries until the
    /// media the others reference take at most this many bytes (nil: no size limit).
    public var gcMaxBytes: Int64?

    // `pushmedia serve` only.

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
    /// `--insecure-no-auth`, `PUSHMEDIA_INSECURE_NO_AUTH`: allow listening on a non-loopback address without auth.
    public var insecureNoAuth = false
    /// `--preview`, `PUSHMEDIA_PREVIEW`: serve the `/preview` page (a form that shows a payload as
    /// notification cards) although `tokens` or `hmacSecret` are set. A browser form cannot send a
    /// token, so the page is not behind auth: without auth configured it is always on (loopback
    /// development); with auth it is off unless this is set. See `previewEnabled`.
    public var preview = false
    /// `--log-format`, `PUSHMEDIA_LOG_FORMAT`: `text` or `json` (one object per line).
    public var logFormat = "text"
    /// Largest `/v1/process` body: 64 KiB.
    public var maxPayloadBodyBytes = 64 * 1024
    /// Largest `/v1/batch` body (4 MiB) and number of payloads in it (500).
    public var maxBatchBodyBytes = 4 * 1024 * 1024
    public var maxBatchPayloads = 500

    public init() {}

    /// Whether `pushmedia serve` answers `/preview`: when no auth is configured, or with `--preview`.
    public var previewEnabled: Bool { preview || (tokens.isEmpty && hmacSecret == nil) }

    /// The environment variable behind each setting.
    public static let environmentKeys: [String: String] = [
        "store": "PUSHMEDIA_STORE", "base-url": "PUSHMEDIA_BASE_URL", "budget": "PUSHMEDIA_BUDGET",
        "allow-private-networks": "PUSHMEDIA_ALLOW_PRIVATE_NETWORKS", "media-key": "PUSHMEDIA_MEDIA_KEYS",
        "on-reject": "PUSHMEDIA_ON_REJECT", "trust-peer": "PUSHMEDIA_TRUSTED_PEERS", "media-root": "PUSHMEDIA_MEDIA_ROOT",
        "long-edge": "PUSHMEDIA_LONG_EDGE", "thumb-edge": "PUSHMEDIA_THUMB_EDGE",
        "video-edge": "PUSHMEDIA_VIDEO_EDGE", "clip-seconds": "PUSHMEDIA_CLIP_SECONDS",
        "max-pixels": "PUSHMEDIA_MAX_PIXELS", "max-frames": "PUSHMEDIA_MAX_FRAMES",
        "max-source-bytes": "PUSHMEDIA_MAX_SOURCE_BYTES", "jpeg-quality": "PUSHMEDIA_JPEG_QUALITY",
        "connect-timeout": "PUSHMEDIA_CONNECT_TIMEOUT", "low-speed-time": "PUSHMEDIA_LOW_SPEED_TIME",
        "max-redirects": "PUSHMEDIA_MAX_REDIRECTS", "background-limit": "PUSHMEDIA_BACKGROUND_LIMIT",
        "max-jobs": "PUSHMEDIA_MAX_JOBS", "max-queue": "PUSHMEDIA_MAX_QUEUE",
        "host": "PUSHMEDIA_HOST", "port": "PUSHMEDIA_PORT", "metrics-host": "PUSHMEDIA_METRICS_HOST", "metrics-port": "PUSHMEDIA_METRICS_PORT", "token": "PUSHMEDIA_TOKENS", "hmac-secret": "PUSHMEDIA_HMAC_SECRET",
        "insecure-no-auth": "PUSHMEDIA_INSECURE_NO_AUTH", "log-format": "PUSHMEDIA_LOG_FORMAT", "preview": "PUSHMEDIA_PREVIEW",
        "decode-memory": "PUSHMEDIA_DECODE_MEMORY", "profile": "PUSHMEDIA_PROFILE", "vendor": "PUSHMEDIA_VENDOR", "crop": "PUSHMEDIA_CROP",
        "thumb-aspect": "PUSHMEDIA_THUMB_ASPECT", "thumb-hidden": "PUSHMEDIA_THUMB_HIDDEN",
        "s3-endpoint": "PUSHMEDIA_S3_ENDPOINT", "s3-region": "PUSHMEDIA_S3_REGION", "s3-access-key-id": "PUSHMEDIA_S3_ACCESS_KEY_ID",
        "s3-secret-access-key": "PUSHMEDIA_S3_SECRET_ACCESS_KEY", "s3-session-token": "PUSHMEDIA_S3_SESSION_TOKEN",
        "work-dir": "PUSHMEDIA_WORK_DIR", "index-cache": "PUSHMEDIA_INDEX_CACHE", "index-cache-ttl": "PUSHMEDIA_INDEX_CACHE_TTL",
        "media-memory": "PUSHMEDIA_MEDIA_MEMORY", "min-free-space": "PUSHMEDIA_MIN_FREE_SPACE",
        "min-ttl": "PUSHMEDIA_MIN_TTL", "max-ttl": "PUSHMEDIA_MAX_TTL",
        "gc-every": "PUSHMEDIA_GC_EVERY", "older-than": "PUSHMEDIA_GC_OLDER_THAN", "max-bytes": "PUSHMEDIA_GC_MAX_BYTES",
    ]

    /// The standard AWS variables, read when the `PUSHMEDIA_S3_*` one is absent.
    static let awsEnvironmentKeys: [String: String] = [
        "s3-access-key-id": "AWS_ACCESS_KEY_ID", "s3-secret-access-key": "AWS_SECRET_ACCESS_KEY", "s3-session-token": "AWS_SESSION_TOKEN",
    ]

    /// The object store settings for `s3://bucket/prefix`.
    func s3Settings(bucket: String, prefix: String) throws(StoreError) -> S3Settings {
        guard let endpoint = s3Endpoint else {
            throw .invalidLocation("s3://\(bucket) needs --s3-endpoint (or PUSHMEDIA_S3_ENDPOINT), e.g. https://s3.us-east-1.amazonaws.com")
        }
        guard let accessKey = s3AccessKey, let secretKey = s3SecretKey else {
            throw .invalidLocation("s3://\(bucket) needs credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or PUSHMEDIA_S3_ACCESS_KEY_ID and PUSHMEDIA_S3_SECRET_ACCESS_KEY)")
        }
        return S3Settings(endpoint: endpoint, region: s3Region, bucket: bucket, prefix: prefix, accessKey: accessKey, secretKey: secretKey,
                          sessionToken: s3SessionToken)
    }

    /// Applies one setting given as text (from a flag or an environment variable).
    /// - Parameter name: the flag name without dashes, e.g. `budget`.
    public mutating func set(_ name: String, to text: String) throws(ConfigError) {
        func int(_ range: ClosedRange<Int64>) throws(ConfigError) -> Int64 {
            guard let value = Int64(text.replacingOccurrences(of: "_", with: "")), range.contains(value) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            return value
        }
        func bool() throws(ConfigError) -> Bool {
            switch text.lowercased() {
            case "1", "true", "yes", "on": return true
            case "0", "false", "no", "off", "": return false
            default: throw ConfigError.invalidValue(name: name, value: text, expected: "true or false")
            }
        }
        func duration() throws(ConfigError) -> Duration {
            guard let value = Self.parseDuration(text) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "a duration such as 10, 2.5s or 800ms")
            }
            return value
        }
        switch name {
        case "store":
            do { _ = try StoreLocation(text) } catch { throw ConfigError.invalidValue(name: name, value: text, expected: "a directory or s3://BUCKET[/PREFIX]") }
            storeLocation = text
        case "s3-endpoint":
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), url.host != nil,
                  url.query == nil, url.path.isEmpty || url.path == "/" else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "an http(s) URL without a path, e.g. https://s3.us-east-1.amazonaws.com")
            }
            s3Endpoint = text.hasSuffix("/") ? String(text.dropLast()) : text
        case "s3-region":
            guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "a region name such as us-east-1")
            }
            s3Region = text
        case "s3-access-key-id": s3AccessKey = text.isEmpty ? nil : text
        case "s3-secret-access-key": s3SecretKey = text.isEmpty ? nil : text
        case "s3-session-token": s3SessionToken = text.isEmpty ? nil : text
        case "work-dir":
            guard !text.isEmpty else { throw ConfigError.invalidValue(name: name, value: text, expected: "a directory") }
            workDirectory = text
        case "index-cache": indexCacheEntries = Int(try int(1...100_000_000))
        case "media-memory": mediaMemory = try int(0...1_000_000_000_000)
        case "min-free-space": minFreeSpace = try int(0...1_000_000_000_000_000)
        case "index-cache-ttl", "min-ttl", "max-ttl":
            guard let value = Self.parseAge(text), value >= .seconds(1) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "a duration of at least a second such as 30s, 10m, 12h or 7d")
            }
            switch name {
            case "index-cache-ttl": indexCacheTTL = value
            case "min-ttl": minTTL = value
            default: maxTTL = value
            }
        case "gc-every", "older-than":
            guard let value = Self.parseAge(text), value >= .seconds(60) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "a duration of at least a minute such as 90m, 12h, 30d or 2w")
            }
            if name == "gc-every" { gcEvery = value } else { gcOlderThan = value }
        case "max-bytes": gcMaxBytes = try int(0...Int64.max / 2)
        case "base-url":
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                  ["http", "https", "file"].contains(scheme) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "an absolute http(s) URL")
            }
            baseURL = text.hasSuffix("/") ? String(text.dropLast()) : text
        case "budget": budget = try duration()
        case "allow-private-networks": allowPrivateNetworks = try bool()
        case "insecure-no-auth": insecureNoAuth = try bool()
        case "preview": preview = try bool()
        case "host":
            guard !text.isEmpty else { throw ConfigError.invalidValue(name: name, value: text, expected: "an address such as 127.0.0.1 or 0.0.0.0") }
            host = text
        case "port": port = Int(try int(0...65535))
        case "metrics-port": metricsPort = Int(try int(0...65535))
        case "metrics-host":
            guard !text.isEmpty else { throw ConfigError.invalidValue(name: name, value: text, expected: "an address such as 127.0.0.1 or 10.0.0.5") }
            metricsHost = text
        case "token":
            tokens += text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        case "hmac-secret":
            guard text.utf8.count >= 16 else { throw ConfigError.invalidValue(name: name, value: "(hidden)", expected: "a secret of at least 16 bytes") }
            hmacSecret = text
        case "log-format":
            guard ["text", "json"].contains(text) else { throw ConfigError.invalidValue(name: name, value: text, expected: "text or json") }
            logFormat = text
        case "media-key":
            extraMediaKeys += text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        case "on-reject":
            guard let value = OnReject(rawValue: text) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "drop or keep")
            }
            onReject = value
        case "media-root": mediaRoot = text
        case "profile":
            guard let profile = PlatformProfile.profiles[text.lowercased()] else {
                throw ConfigError.invalidValue(name: name, value: text, expected: PlatformProfile.profiles.keys.sorted().joined(separator: ", "))
            }
            self.profile = profile
        case "vendor":
            if text.lowercased() == "auto" { vendor = nil; break }
            guard let value = Vendor(rawValue: text.lowercased()) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "auto, " + Vendor.allCases.map(\.rawValue).joined(separator: ", "))
            }
            vendor = value
        case "crop":
            guard let value = CropMode(rawValue: text.lowercased() == "center" ? "centre" : text.lowercased()) else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "attention, centre or none")
            }
            crop = value
        case "thumb-aspect":
            if ["", "none", "0"].contains(text.lowercased()) { thumbnailAspect = nil; break }
            let parts = text.split(separator: ":").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2, let w = parts[0], let h = parts[1], w > 0, h > 0, w.isFinite, h.isFinite, w / h >= 0.1, w / h <= 10 else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "width:height such as 1:1 or 16:9 (ratio 0.1...10), or none")
            }
            thumbnailAspect = w / h
        case "thumb-hidden": thumbnailHidden = try bool()
        case "trust-peer":
            for peer in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !peer.isEmpty {
                guard let colon = peer.lastIndex(of: ":"), Int(peer[peer.index(after: colon)...]) != nil else {
                    throw ConfigError.invalidValue(name: name, value: peer, expected: "address:port, e.g. 10.0.0.5:443 or [fd00::5]:443")
                }
                trustedPeers.append(peer)
            }
        case "long-edge": longEdge = Int(try int(16...16384))
        case "video-edge": videoEdge = Int(try int(64...4096))
        case "clip-seconds": clipSeconds = Int(try int(1...3600))
        case "thumb-edge":
            thumbnailEdge = Int(try int(0...4096))
            guard thumbnailEdge == 0 || thumbnailEdge >= 16 else {
                throw ConfigError.invalidValue(name: name, value: text, expected: "0 (no thumbnails) or 16...4096")
            }
        case "max-pixels": maxPixels = try int(1...1_000_000_000)
        case "max-frames": maxFrames = Int(try int(1...100_000))
        case "max-source-bytes": maxSourceBytes = try int(1...2_000_000_000)
        case "decode-memory": decodeMemory = try int(1_000_000...64_000_000_000)
        case "jpeg-quality": jpegQuality = Int(try int(10...100))
        case "connect-timeout": connectTimeout = try duration()
        case "low-speed-time": lowSpeedTime = try duration()
        case "max-redirects": maxRedirects = Int(try int(0...20))
        case "background-limit": backgroundLimit = try duration()
        case "max-jobs": maxJobs = Int(try int(1...10_000))
        case "max-queue": maxQueuedJobs = Int(try int(0...100_000))
        default: throw ConfigError.unknownSetting(name)
        }
    }

    /// Applies settings given as (flag name, text) pairs in order, skipping nil values; repeat a
    /// name for list settings such as `media-key` or `token`.
    public mutating func apply(_ settings: [(String, String?)]) throws(ConfigError) {
        for case let (name, text?) in settings { try set(name, to: text) }
    }

    /// Reads every `PUSHMEDIA_*` variable present in `environment` on top of the defaults.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> PushMediaConfig {
        var config = PushMediaConfig()
        for (name, variable) in environmentKeys.sorted(by: { $0.key < $1.key }) {
            let fallback = awsEnvironmentKeys[name]
            guard let (value, source) = environment[variable].map({ ($0, variable) }) ?? fallback.flatMap({ key in environment[key].map { ($0, key) } })
            else { continue }
            do { try config.set(name, to: value) } catch { throw ConfigError.inEnvironment(variable: source, error) }
        }
        return config
    }

    /// Parses an age such as `45s`, `90m`, `12h`, `30d` or `2w` (plain numbers are seconds), up to ten years.
    public static func parseAge(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)]
        let (number, scale) = units.first { trimmed.hasSuffix($0.0) }.map { (String(trimmed.dropLast()), $0.1) } ?? (trimmed, 1)
        guard let value = Double(number), value.isFinite, value >= 0, value * scale <= 10 * 365 * 86_400 else { return nil }
        return .seconds(Int64((value * scale).rounded()))
    }

    /// Parses `10`, `2.5`, `2.5s`, `800ms` into a duration (plain numbers are seconds).
    public static func parseDuration(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        var number = trimmed
        var scale = 1.0
        if trimmed.hasSuffix("ms") { number = String(trimmed.dropLast(2)); scale = 0.001 }
        else if trimmed.hasSuffix("s") { number = String(trimmed.dropLast()) }
        else if trimmed.hasSuffix("m") { number = String(trimmed.dropLast()); scale = 60 }
        guard let value = Double(number), value.isFinite, value >= 0, value * scale <= 86_400 else { return nil }
        return .milliseconds(Int64((value * scale * 1000).rounded()))
    }
}

/// A setting that could not be applied.
public enum ConfigError: Error, CustomStringConvertible, Sendable {
    case invalidValue(name: String, value: String, expected: String)
    case unknownSetting(String)
    indirect case inEnvironment(variable: String, ConfigError)

    public var description: String {
        switch self {
        case let .invalidValue(name, value, expected): "invalid value \"\(value)\" for --\(name): expected \(expected)"
        case let .unknownSetting(name): "unknown setting --\(name)"
        case let .inEnvironment(variable, error): "\(variable): \(error)"
        }
    }
}
