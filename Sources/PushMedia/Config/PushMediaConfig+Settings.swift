import Foundation

extension PushMediaConfig {
    /// Every library setting: flag, environment variable, commands, documented default, help and
    /// how its text is read. The README's settings tables show the same flags, variables and
    /// defaults (a test compares them).
    public static let settings: [Setting<PushMediaConfig>] =
        file + store + fleet + fetching + images + output + serving + retention

    /// The settings file: the other settings by their flags' names (`SettingsFile`).
    static let file: [Setting<PushMediaConfig>] = [
        Setting(
            "config", "PUSHMEDIA_CONFIG", default: "none",
            help: "Read settings from this YAML (or JSON) file, by their flags' names; the environment and flags win"
        ) {
            config, value throws(ConfigError) in
            guard FileManager.default.isReadableFile(atPath: value.text) else {
                throw value.invalid(expected: "a readable YAML file")
            }
            config.settingsFile = value.text
        }
    ]

    /// Where media and the cache index live.
    static let store: [Setting<PushMediaConfig>] = [
        Setting(
            "store", "PUSHMEDIA_STORE", default: "`pushmedia-store`",
            help: "Media store: a directory, or s3://BUCKET[/PREFIX]"
        ) {
            config, value throws(ConfigError) in
            do { _ = try StoreLocation(value.text) } catch {
                throw value.invalid(expected: "a directory or s3://BUCKET[/PREFIX]")
            }
            config.storeLocation = value.text
        },
        Setting(
            "s3-endpoint", "PUSHMEDIA_S3_ENDPOINT", default: "none (required with `s3://`)",
            help: "S3-compatible endpoint for an s3:// store, path-style; credentials come from AWS_ACCESS_KEY_ID, "
                + "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or PUSHMEDIA_S3_*"
        ) {
            config, value throws(ConfigError) in
            let text = value.text
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["http", "https"].contains(scheme), url.host != nil, url.query == nil,
                url.path.isEmpty || url.path == "/"
            else {
                throw value.invalid(expected: "an http(s) URL without a path, e.g. https://s3.us-east-1.amazonaws.com")
            }
            config.s3Endpoint = text.hasSuffix("/") ? String(text.dropLast()) : text
        },
        Setting(
            "s3-region", "PUSHMEDIA_S3_REGION", default: "`us-east-1`",
            help: "Region S3 requests are signed for"
        ) {
            config, value throws(ConfigError) in
            let allowed = { (character: Character) in
                character.isASCII && (character.isLetter || character.isNumber || character == "-")
            }
            guard !value.text.isEmpty, value.text.allSatisfy(allowed) else {
                throw value.invalid(expected: "a region name such as us-east-1")
            }
            config.s3Region = value.text
        },
        Setting(
            "s3-access-key-id", "PUSHMEDIA_S3_ACCESS_KEY_ID", fallback: "AWS_ACCESS_KEY_ID",
            .environmentOnly, commands: [], default: "none", help: "S3 access key id"
        ) {
            config, value throws(ConfigError) in
            config.s3AccessKey = value.text.isEmpty ? nil : value.text
        },
        Setting(
            "s3-secret-access-key", "PUSHMEDIA_S3_SECRET_ACCESS_KEY", fallback: "AWS_SECRET_ACCESS_KEY",
            .environmentOnly, commands: [], default: "none", help: "S3 secret access key"
        ) {
            config, value throws(ConfigError) in
            config.s3SecretKey = value.text.isEmpty ? nil : value.text
        },
        Setting(
            "s3-session-token", "PUSHMEDIA_S3_SESSION_TOKEN", fallback: "AWS_SESSION_TOKEN",
            .environmentOnly, commands: [], default: "none", help: "S3 session token of temporary credentials"
        ) {
            config, value throws(ConfigError) in
            config.s3SessionToken = value.text.isEmpty ? nil : value.text
        },
        Setting(
            "work-dir", "PUSHMEDIA_WORK_DIR", default: "`$TMPDIR/pushmedia-work`",
            help: "Local folder for downloads with an s3:// store"
        ) {
            config, value throws(ConfigError) in
            guard !value.text.isEmpty else { throw value.invalid(expected: "a directory") }
            config.workDirectory = value.text
        },
        .integer(
            "index-cache", "PUSHMEDIA_INDEX_CACHE", \.indexCacheEntries, in: 1...100_000_000,
            help: "Cache entries kept in memory in front of the store's index"),
        .age(
            "index-cache-ttl", "PUSHMEDIA_INDEX_CACHE_TTL", \.indexCacheTTL,
            help: "How long an entry held in memory is used before the index is read again"),
        .age(
            "min-ttl", "PUSHMEDIA_MIN_TTL", \.minTTL,
            help: "A fetched URL is reused at least this long before it is revalidated with its origin"),
        .age(
            "max-ttl", "PUSHMEDIA_MAX_TTL", \.maxTTL,
            help: "...and at most this long, whatever the origin's Cache-Control or Expires"),
        Setting(
            "base-url", "PUSHMEDIA_BASE_URL", default: "`http://127.0.0.1:8080/media`",
            help: "Public URL the store is served under"
        ) {
            config, value throws(ConfigError) in
            let text = value.text
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["http", "https", "file"].contains(scheme)
            else {
                throw value.invalid(expected: "an absolute http(s) URL")
            }
            config.baseURL = text.hasSuffix("/") ? String(text.dropLast()) : text
        },
    ]

    /// A fleet's coordination through PostgreSQL (docs/fleet.md): `serve`, `purge`, `batch`, `work`
    /// and `fleet-db`.
    static let fleet: [Setting<PushMediaConfig>] = [
        Setting(
            "fleet-db", "PUSHMEDIA_FLEET_DB", commands: [.serve, .purge, .batch, .work, .fleetDB], default: "none",
            help: "PostgreSQL database through which the nodes on one store share jobs and purges: "
                + "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require|verify-full]"
        ) {
            config, value throws(ConfigError) in
            let text = value.text
            guard !text.isEmpty else {
                config.fleetDB = nil
                return
            }
            do throws(FleetDBAddress.Invalid) { _ = try FleetDBAddress(text) } catch {
                throw value.invalid(expected: error.expected, shown: FleetDBAddress.redacted(text))
            }
            config.fleetDB = text
        },
        Setting(
            "fleet-db-password-file", "PUSHMEDIA_FLEET_DB_PASSWORD_FILE",
            commands: [.serve, .purge, .batch, .work, .fleetDB],
            default: "none", help: "Read the fleet database's password from this file"
        ) {
            config, value throws(ConfigError) in
            guard FileManager.default.isReadableFile(atPath: value.text) else {
                throw value.invalid(expected: "a readable file")
            }
            config.fleetDBPasswordFile = value.text
        },
        .duration(
            "fleet-lease", "PUSHMEDIA_FLEET_LEASE", \.fleetLease, commands: [.serve, .purge, .batch, .work, .fleetDB],
            help: "A job's lease in the fleet, renewed while it runs: the longest a node's job waits for a holder "
                + "whose end the fleet cannot see"),
        .duration(
            "fleet-db-timeout", "PUSHMEDIA_FLEET_DB_TIMEOUT", \.fleetDBTimeout,
            commands: [.serve, .purge, .batch, .work, .fleetDB],
            help: "How long a node waits for the fleet database before it shares the job per node only"),
        .duration(
            "fleet-node-timeout", "PUSHMEDIA_FLEET_NODE_TIMEOUT", \.fleetNodeTimeout,
            commands: [.serve, .purge, .batch, .work, .fleetDB],
            help: "A node silent this long to the fleet database (frozen, cut off) loses its leases and batch items "
                + "to the others; a dead node's pass at once"),
    ]

    /// Time, origins and downloads.
    static let fetching: [Setting<PushMediaConfig>] = [
        .duration(
            "budget", "PUSHMEDIA_BUDGET", \.budget, help: "Time budget per payload, e.g. 10, 2.5s, 800ms"),
        .flag(
            "allow-private-networks", "PUSHMEDIA_ALLOW_PRIVATE_NETWORKS", \.allowPrivateNetworks,
            help: "Allow fetching from loopback/private/link-local addresses"),
        .flag(
            "otel-origin-traceparent", "PUSHMEDIA_OTEL_ORIGIN_TRACEPARENT", \.originTraceparent, commands: [.serve],
            help: "Send traceparent to origins with each fetch when traces are on (they are third parties)"),
        Setting(
            "trust-peer", "PUSHMEDIA_TRUSTED_PEERS", .list, default: "none",
            help: "An internal address:port that may be fetched from anyway; repeatable"
        ) {
            config, value throws(ConfigError) in
            let peers = value.text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            for peer in peers where !peer.isEmpty {
                guard let colon = peer.lastIndex(of: ":"), Int(peer[peer.index(after: colon)...]) != nil else {
                    throw ConfigError.invalidValue(
                        name: value.name, value: peer,
                        expected: "address:port, e.g. 10.0.0.5:443 or [fd00::5]:443")
                }
                config.trustedPeers.append(peer)
            }
        },
        Setting(
            "media-key", "PUSHMEDIA_MEDIA_KEYS", .list, default: "none",
            help: "Extra top-level key holding a media URL; repeatable"
        ) {
            config, value throws(ConfigError) in
            config.extraMediaKeys += value.items
        },
        Setting(
            "on-reject", "PUSHMEDIA_ON_REJECT", default: "`drop`",
            help: "drop or keep the media key of rejected media"
        ) {
            config, value throws(ConfigError) in
            guard let onReject = OnReject(rawValue: value.text) else { throw value.invalid(expected: "drop or keep") }
            config.onReject = onReject
        },
        Setting(
            "media-root", "PUSHMEDIA_MEDIA_ROOT", default: "input's directory",
            help: "Directory local media paths must resolve inside"
        ) {
            config, value throws(ConfigError) in
            config.mediaRoot = value.text
        },
        .integer(
            "max-source-bytes", "PUSHMEDIA_MAX_SOURCE_BYTES", \.maxSourceBytes, in: 1...2_000_000_000,
            help: "Largest download in bytes"),
        .duration(
            "connect-timeout", "PUSHMEDIA_CONNECT_TIMEOUT", \.connectTimeout,
            help: "Time allowed to establish a connection"),
        .duration(
            "low-speed-time", "PUSHMEDIA_LOW_SPEED_TIME", \.lowSpeedTime,
            help: "Abort a download slower than 1 KiB/s for this long"),
        .integer(
            "max-redirects", "PUSHMEDIA_MAX_REDIRECTS", \.maxRedirects, in: 0...20,
            help: "Redirects followed, each one checked again"),
    ]

    /// Decoding and transcoding.
    static let images: [Setting<PushMediaConfig>] = [
        .integer(
            "long-edge", "PUSHMEDIA_LONG_EDGE", \.longEdge, in: 16...16384,
            help: "Longest side of a transcoded image in px"),
        Setting(
            "thumb-edge", "PUSHMEDIA_THUMB_EDGE", default: "`512`",
            help: "Longest side of the thumbnail in px, 0 for none"
        ) {
            config, value throws(ConfigError) in
            config.thumbnailEdge = Int(try value.integer(in: 0...4096))
            guard config.thumbnailEdge == 0 || config.thumbnailEdge >= 16 else {
                throw value.invalid(expected: "0 (no thumbnails) or 16...4096")
            }
        },
        .integer(
            "max-pixels", "PUSHMEDIA_MAX_PIXELS", \.maxPixels, in: 1...1_000_000_000,
            help: "Largest source image in pixels, read from the header"),
        .integer(
            "max-frames", "PUSHMEDIA_MAX_FRAMES", \.maxFrames, in: 1...100_000, help: "Frames kept in an animation"),
        .integer(
            "video-edge", "PUSHMEDIA_VIDEO_EDGE", \.videoEdge, in: 64...4096,
            help: "Longest side of a transcoded video in px"),
        .integer(
            "clip-seconds", "PUSHMEDIA_CLIP_SECONDS", \.clipSeconds, in: 1...3600,
            help: "Cut a transcoded video or audio that cannot fit its cap whole to this many seconds"),
        .integer(
            "decode-memory", "PUSHMEDIA_DECODE_MEMORY", \.decodeMemory, in: 1_000_000...64_000_000_000,
            help: "Estimated bytes of image decodes running at once"),
        .integer(
            "jpeg-quality", "PUSHMEDIA_JPEG_QUALITY", \.jpegQuality, in: 10...100,
            help: "First JPEG quality tried, lowered step by step until the image fits its cap"),
    ]

    /// What the attachment and the payload look like.
    static let output: [Setting<PushMediaConfig>] = [
        Setting(
            "profile", "PUSHMEDIA_PROFILE", default: "`ios`",
            help: "Platform the attachment is made for: ios, android, huawei, web"
        ) {
            config, value throws(ConfigError) in
            guard let profile = PlatformProfile.profiles[value.text.lowercased()] else {
                throw value.invalid(expected: PlatformProfile.profiles.keys.sorted().joined(separator: ", "))
            }
            config.profile = profile
        },
        Setting(
            "vendor", "PUSHMEDIA_VENDOR", default: "`auto`",
            help: "Payload convention: auto, generic, fcm, onesignal, airship, braze, clevertap, iterable, "
                + "customerio"
        ) {
            config, value throws(ConfigError) in
            if value.text.lowercased() == "auto" {
                config.vendor = nil
                return
            }
            guard let vendor = Vendor(rawValue: value.text.lowercased()) else {
                throw value.invalid(expected: "auto, " + Vendor.allCases.map(\.rawValue).joined(separator: ", "))
            }
            config.vendor = vendor
        },
        Setting(
            "crop", "PUSHMEDIA_CROP", default: "`attention`",
            help: "Crop to a profile's 2:1 shape and place clipping rectangles by: attention, centre, none"
        ) {
            config, value throws(ConfigError) in
            let text = value.text.lowercased()
            guard let crop = CropMode(rawValue: text == "center" ? "centre" : text) else {
                throw value.invalid(expected: "attention, centre or none")
            }
            config.crop = crop
        },
        Setting(
            "thumb-aspect", "PUSHMEDIA_THUMB_ASPECT", default: "none",
            help: "Emit a thumbnail clipping rectangle of this width:height, e.g. 1:1"
        ) {
            config, value throws(ConfigError) in
            if ["", "none", "0"].contains(value.text.lowercased()) {
                config.thumbnailAspect = nil
                return
            }
            let parts = value.text.split(separator: ":").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2, let w = parts[0], let h = parts[1], w > 0, h > 0, w.isFinite, h.isFinite,
                w / h >= 0.1, w / h <= 10
            else {
                throw value.invalid(expected: "width:height such as 1:1 or 16:9 (ratio 0.1...10), or none")
            }
            config.thumbnailAspect = w / h
        },
        .flag(
            "thumb-hidden", "PUSHMEDIA_THUMB_HIDDEN", \.thumbnailHidden,
            help: "Tell the phone to hide the thumbnail"),
    ]

    /// Library settings that only `pushmedia serve` takes as flags: the pipeline's backpressure.
    static let serving: [Setting<PushMediaConfig>] = [
        .integer(
            "max-jobs", "PUSHMEDIA_MAX_JOBS", \.maxJobs, in: 1...10_000, commands: [.serve],
            default: "2 per core, at least 10", help: "Jobs running at once"),
        .integer(
            "max-queue", "PUSHMEDIA_MAX_QUEUE", \.maxQueuedJobs, in: 0...100_000, commands: [.serve],
            help: "Jobs waiting for a slot before answers are 'overloaded'"),
        .duration(
            "background-limit", "PUSHMEDIA_BACKGROUND_LIMIT", \.backgroundLimit, commands: [.serve],
            // `serve`'s default: the library's is 0 (stop at the budget).
            default: "`60s`", help: "How long a job may go on after its budget to fill the cache"),
    ]

    /// Retention: `pushmedia gc`, and `pushmedia serve --gc-every`.
    static let retention: [Setting<PushMediaConfig>] = [
        .age(
            "older-than", "PUSHMEDIA_GC_OLDER_THAN", \.gcOlderThan, atLeastAMinute: true, commands: [.gc, .serve],
            help: "Remove cache entries unused this long, e.g. 30d, 12h (serve: with --gc-every)"),
        .integer(
            "max-bytes", "PUSHMEDIA_GC_MAX_BYTES", \.gcMaxBytes, in: 0...Int64.max / 2, commands: [.gc, .serve],
            default: "none",
            help: "Then remove least recently used entries until the media the rest reference take at most "
                + "this many bytes (serve: with --gc-every)"),
    ]
}
