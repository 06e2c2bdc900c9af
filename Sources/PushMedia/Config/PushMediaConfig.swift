import Foundation

/// What to do with the media key when the media is rejected.
public enum OnReject: String, Sendable, CaseIterable, Codable {
    /// Remove the media key so the phone shows the text at once (default).
    case drop
    /// Leave the original media reference in place.
    case keep
}

/// The library's settings, with their defaults. `settings` (in PushMediaConfig+Settings.swift)
/// declares each one's `PUSHMEDIA_*` environment variable, flag, commands, documented default
/// and help; the server's own settings are in `PushMediaServer`'s `ServerConfig`.
public struct PushMediaConfig: Configurable, Equatable {
    /// `--config`, `PUSHMEDIA_CONFIG`: the settings file the others were read from, if any
    /// (read before the environment and the flags: they win).
    public var settingsFile: String?
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
    /// `--otel-origin-traceparent`, `PUSHMEDIA_OTEL_ORIGIN_TRACEPARENT`: send the fetch's W3C
    /// `traceparent` (and the caller's `tracestate`) to origins when `serve` traces (off: origins
    /// are third parties).
    public var originTraceparent = false
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
    /// (and video poster frame) for a profile with thumbnails (`ios`); 0: no thumbnails.
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
    /// exceed the profile's caps (`ios`: 10 MB image, 5 MB audio, 50 MB video) because they are
    /// made to fit.
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
    public var backgroundLimit: Duration {
        get { givenBackgroundLimit ?? .zero }
        set { givenBackgroundLimit = newValue }
    }
    /// `backgroundLimit` once given (by a setting or assigned); nil: not given, which
    /// `pushmedia serve` takes as its own default.
    public private(set) var givenBackgroundLimit: Duration?
    /// `--max-jobs`, `PUSHMEDIA_MAX_JOBS`: jobs (fetch + transcode) running at once; nil = no limit
    /// (`pushmedia serve` defaults to 2 per core, at least `Templates.maximumPages`).
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
    /// detection), `centre`, or `none` (never crop: an image for a 2:1 profile is only fitted inside its box).
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

    // A fleet's coordination (docs/fleet.md).

    /// `--fleet-db`, `PUSHMEDIA_FLEET_DB`: the PostgreSQL database (`postgres://USER@HOST[:PORT]/DB`)
    /// through which the nodes on one store share their jobs and purges; nil: each node alone.
    public var fleetDB: String?
    /// `--fleet-db-password-file`, `PUSHMEDIA_FLEET_DB_PASSWORD_FILE`: the database password, read
    /// from this file (a password in `fleetDB` works too, but shows in `ps`).
    public var fleetDBPasswordFile: String?
    /// `--fleet-lease`, `PUSHMEDIA_FLEET_LEASE`: how long a job's lease lasts unless renewed (it is,
    /// every third of it, while the job runs): the bound on a handover when the holder's life cannot
    /// be seen (a dead holder is replaced at once, a frozen one after `fleetNodeTimeout`).
    public var fleetLease: Duration = .seconds(10)
    /// `--fleet-db-timeout`, `PUSHMEDIA_FLEET_DB_TIMEOUT`: how long a node waits for the database
    /// before it shares the job per node only.
    public var fleetDBTimeout: Duration = .seconds(1)
    /// `--fleet-node-timeout`, `PUSHMEDIA_FLEET_NODE_TIMEOUT`: how long a node's connection to the
    /// database may be silent (the process frozen, or cut off) before PostgreSQL ends it, and the
    /// node's leases and batch items pass to the others. A node speaks every fifth of it.
    public var fleetNodeTimeout: Duration = .seconds(5)

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

    /// `--older-than`, `PUSHMEDIA_GC_OLDER_THAN`: cache entries unused this long are removed (30d).
    public var gcOlderThan: Duration = .seconds(30 * 86_400)
    /// `--max-bytes`, `PUSHMEDIA_GC_MAX_BYTES`: also remove least recently used entries until the
    /// media the others reference take at most this many bytes (nil: no size limit).
    public var gcMaxBytes: Int64?

    public init() {}

    /// Whether `baseURL` is the object store's bucket itself: the S3 endpoint's host and port
    /// with the bucket in the path (path-style), or the bucket's own host (virtual-hosted). Phones
    /// can then fetch stored files there without the hook.
    public var baseURLIsTheBucket: Bool {
        guard case let .s3(bucket, _)? = try? StoreLocation(storeLocation), let endpoint = s3Endpoint,
            let base = URLComponents(string: baseURL), let store = URLComponents(string: endpoint),
            let baseHost = base.host?.lowercased(), let storeHost = store.host?.lowercased()
        else { return false }
        func port(_ url: URLComponents) -> Int? { url.port ?? ["http": 80, "https": 443][url.scheme ?? ""] }
        guard port(base) == port(store) else { return false }
        return (baseHost == storeHost && base.path.split(separator: "/").contains(Substring(bucket)))
            || baseHost == bucket + "." + storeHost
    }

    /// The object store settings for `s3://bucket/prefix`.
    func s3Settings(bucket: String, prefix: String) throws(StoreError) -> S3Settings {
        guard let endpoint = s3Endpoint else {
            throw .invalidLocation(
                "s3://\(bucket) needs --s3-endpoint (or PUSHMEDIA_S3_ENDPOINT), e.g. https://s3.us-east-1.amazonaws.com"
            )
        }
        guard let accessKey = s3AccessKey, let secretKey = s3SecretKey else {
            throw .invalidLocation(
                "s3://\(bucket) needs credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                    + "PUSHMEDIA_S3_ACCESS_KEY_ID and PUSHMEDIA_S3_SECRET_ACCESS_KEY)"
            )
        }
        return S3Settings(
            endpoint: endpoint, region: s3Region, bucket: bucket, prefix: prefix, accessKey: accessKey,
            secretKey: secretKey,
            sessionToken: s3SessionToken)
    }

    /// Parses an age such as `45s`, `90m`, `12h`, `30d` or `2w` (plain numbers are seconds), up to ten years.
    public static func parseAge(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)]
        let (number, scale) =
            units.first { trimmed.hasSuffix($0.0) }.map { (String(trimmed.dropLast()), $0.1) } ?? (trimmed, 1)
        guard let value = Double(number), value.isFinite, value >= 0, value * scale <= 10 * 365 * 86_400 else {
            return nil
        }
        return .seconds(Int64((value * scale).rounded()))
    }

    /// Parses `10`, `2.5`, `2.5s`, `800ms`, `10m`, `1h` into a duration of at most a day (plain
    /// numbers are seconds).
    public static func parseDuration(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        var number = trimmed
        var scale = 1.0
        if trimmed.hasSuffix("ms") {
            number = String(trimmed.dropLast(2))
            scale = 0.001
        } else if trimmed.hasSuffix("s") {
            number = String(trimmed.dropLast())
        } else if trimmed.hasSuffix("m") {
            number = String(trimmed.dropLast())
            scale = 60
        } else if trimmed.hasSuffix("h") {
            number = String(trimmed.dropLast())
            scale = 3600
        }
        guard let value = Double(number), value.isFinite, value >= 0, value * scale <= 86_400 else { return nil }
        return .milliseconds(Int64((value * scale * 1000).rounded()))
    }
}

/// A setting that could not be applied.
public enum ConfigError: Error, CustomStringConvertible, Sendable {
    case invalidValue(name: String, value: String, expected: String)
    /// A name that is no setting's, with the nearest setting's name when one is close.
    case unknownSetting(String, nearest: String? = nil)
    indirect case inEnvironment(variable: String, ConfigError)
    /// A settings file (`--config`) that cannot be read or is not a mapping of settings.
    case file(path: String, reason: String)
    /// A setting of a settings file, and what is wrong with it.
    indirect case inFile(path: String, ConfigError)
    /// Every problem of a settings file, each on its own line.
    indirect case several([ConfigError])

    public var description: String {
        switch self {
        case let .invalidValue(name, value, expected): "invalid value \"\(value)\" for --\(name): expected \(expected)"
        case let .unknownSetting(name, nearest):
            "unknown setting --\(name)" + (nearest.map { " (did you mean --\($0)?)" } ?? "")
        case let .inEnvironment(variable, error): "\(variable): \(error)"
        case let .file(path, reason): "\(path): \(reason)"
        case let .inFile(path, error): "\(path): \(error)"
        case let .several(problems): problems.map(\.description).joined(separator: "\n")
        }
    }

    /// Each problem, one per line (`several`'s, or this one).
    public var problems: [ConfigError] {
        if case let .several(problems) = self { return problems.flatMap(\.problems) }
        return [self]
    }

    /// The name among `names` nearest to `name` (at most a third of its letters off, 2 at least),
    /// for a "did you mean".
    public static func nearest(to name: String, among names: [String]) -> String? {
        let limit = max(2, name.count / 3)
        let scored = names.map { ($0, editDistance(name, $0)) }.filter { $0.1 <= limit }
        return scored.min { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }?.0
    }

    /// Levenshtein's distance: the fewest letters inserted, removed or changed from `a` to `b`.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let (a, b) = (Array(a), Array(b))
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
