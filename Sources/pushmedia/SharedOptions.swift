import ArgumentParser
import Foundation
import PushMedia

/// Flags shared by every command. Each falls back to its `PUSHMEDIA_*` variable, then to the
/// default documented in `PushMediaConfig`.
struct SharedOptions: ParsableArguments {
    @Option(help: "Media store: a directory, or s3://BUCKET[/PREFIX] (env PUSHMEDIA_STORE; default ./pushmedia-store).")
    var store: String?
    @Option(name: .customLong("s3-endpoint"), help: "S3-compatible endpoint for an s3:// store, path-style (env PUSHMEDIA_S3_ENDPOINT). Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or PUSHMEDIA_S3_*.")
    var s3Endpoint: String?
    @Option(name: .customLong("s3-region"), help: "Region S3 requests are signed for (env PUSHMEDIA_S3_REGION; default us-east-1).")
    var s3Region: String?
    @Option(name: .customLong("work-dir"), help: "Local folder for downloads with an s3:// store (env PUSHMEDIA_WORK_DIR; default $TMPDIR/pushmedia-work).")
    var workDir: String?
    @Option(name: .customLong("index-cache"), help: "Cache entries kept in memory in front of the store's index (env PUSHMEDIA_INDEX_CACHE; default 100000).")
    var indexCache: String?
    @Option(name: .customLong("index-cache-ttl"), help: "How long an entry held in memory is used before the index is read again (env PUSHMEDIA_INDEX_CACHE_TTL; default 60s).")
    var indexCacheTTL: String?
    @Option(name: .customLong("min-ttl"), help: "A fetched URL is reused at least this long before it is revalidated with its origin (env PUSHMEDIA_MIN_TTL; default 1m).")
    var minTTL: String?
    @Option(name: .customLong("max-ttl"), help: "...and at most this long, whatever the origin's Cache-Control or Expires (env PUSHMEDIA_MAX_TTL; default 1d).")
    var maxTTL: String?
    @Option(name: .customLong("base-url"), help: "Public URL the store is served under (env PUSHMEDIA_BASE_URL; default http://127.0.0.1:8080/media).")
    var baseURL: String?
    @Option(help: "Time budget per payload, e.g. 10, 2.5s, 800ms (env PUSHMEDIA_BUDGET; default 10s).")
    var budget: String?
    @Flag(name: .customLong("allow-private-networks"), help: "Allow fetching from loopback/private/link-local addresses (env PUSHMEDIA_ALLOW_PRIVATE_NETWORKS).")
    var allowPrivateNetworks = false
    @Option(name: .customLong("media-key"), help: "Extra top-level key holding a media URL; repeatable (env PUSHMEDIA_MEDIA_KEYS, comma-separated).")
    var mediaKeys: [String] = []
    @Option(name: .customLong("trust-peer"), help: "An internal address:port that may be fetched from anyway; repeatable (env PUSHMEDIA_TRUSTED_PEERS).")
    var trustedPeers: [String] = []
    @Option(name: .customLong("on-reject"), help: "drop or keep the media key of rejected media (env PUSHMEDIA_ON_REJECT; default drop).")
    var onReject: String?
    @Option(name: .customLong("media-root"), help: "Directory local media paths must resolve inside (env PUSHMEDIA_MEDIA_ROOT; default: the input's directory).")
    var mediaRoot: String?
    @Option(name: .customLong("long-edge"), help: "Longest side of a transcoded image in px (env PUSHMEDIA_LONG_EDGE; default 2048).")
    var longEdge: String?
    @Option(name: .customLong("thumb-edge"), help: "Longest side of the thumbnail in px (env PUSHMEDIA_THUMB_EDGE; default 512).")
    var thumbEdge: String?
    @Option(name: .customLong("max-pixels"), help: "Largest source image in pixels, read from the header (env PUSHMEDIA_MAX_PIXELS; default 50000000).")
    var maxPixels: String?
    @Option(name: .customLong("max-frames"), help: "Frames kept in an animation (env PUSHMEDIA_MAX_FRAMES; default 100).")
    var maxFrames: String?
    @Option(name: .customLong("max-source-bytes"), help: "Largest download in bytes (env PUSHMEDIA_MAX_SOURCE_BYTES; default 200000000).")
    var maxSourceBytes: String?

    @Option(name: .customLong("video-edge"), help: "Longest side of a transcoded video in px (env PUSHMEDIA_VIDEO_EDGE; default 1280).")
    var videoEdge: String?
    @Option(name: .customLong("clip-seconds"), help: "Cut a transcoded video or audio that cannot fit its cap whole to this many seconds (env PUSHMEDIA_CLIP_SECONDS; default 30).")
    var clipSeconds: String?
    @Option(name: .customLong("decode-memory"), help: "Estimated bytes of image decodes running at once (env PUSHMEDIA_DECODE_MEMORY; default 256000000).")
    var decodeMemory: String?
    @Option(help: "Platform the attachment is made for: ios, android, huawei, web (env PUSHMEDIA_PROFILE; default ios).")
    var profile: String?
    @Option(help: "Payload convention: auto, generic, fcm, onesignal, airship, braze, clevertap, iterable, customerio (env PUSHMEDIA_VENDOR; default auto).")
    var vendor: String?
    @Option(help: "Crop to a profile's 2:1 shape and place clipping rectangles by: attention, centre, none (env PUSHMEDIA_CROP; default attention).")
    var crop: String?
    @Option(name: .customLong("thumb-aspect"), help: "Emit a thumbnail clipping rectangle of this width:height, e.g. 1:1 (env PUSHMEDIA_THUMB_ASPECT; default none).")
    var thumbAspect: String?
    @Flag(name: .customLong("thumb-hidden"), help: "Tell the phone to hide the thumbnail (env PUSHMEDIA_THUMB_HIDDEN).")
    var thumbHidden = false

    /// Defaults, then environment, then flags.
    func config(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PushMediaConfig {
        var config: PushMediaConfig
        do { config = try PushMediaConfig.fromEnvironment(environment) } catch { throw ValidationError(error.description) }
        let flags: [(String, String?)] = [
            ("store", store), ("base-url", baseURL), ("budget", budget), ("on-reject", onReject), ("media-root", mediaRoot),
            ("long-edge", longEdge), ("thumb-edge", thumbEdge), ("max-pixels", maxPixels), ("max-frames", maxFrames),
            ("max-source-bytes", maxSourceBytes), ("decode-memory", decodeMemory), ("profile", profile), ("vendor", vendor), ("crop", crop),
            ("thumb-aspect", thumbAspect), ("s3-endpoint", s3Endpoint), ("s3-region", s3Region), ("work-dir", workDir), ("index-cache", indexCache),
            ("index-cache-ttl", indexCacheTTL), ("min-ttl", minTTL), ("max-ttl", maxTTL), ("video-edge", videoEdge),
            ("clip-seconds", clipSeconds),
        ]
        do {
            try config.apply(flags + mediaKeys.map { ("media-key", $0) } + trustedPeers.map { ("trust-peer", $0) })
        } catch { throw ValidationError(error.description) }
        if allowPrivateNetworks { config.allowPrivateNetworks = true }
        if thumbHidden { config.thumbnailHidden = true }
        return config
    }
}

/// Opens the pipeline and checks its store (an object store must answer with its bucket); a
/// store that cannot be opened or reached is an I/O error (exit 74) with a message naming it.
func openPipeline(_ config: PushMediaConfig) async throws -> Pipeline {
    do {
        let pipeline = try Pipeline(config: config)
        try await pipeline.verifyStore()
        return pipeline
    } catch {
        FileHandle.writeError("pushmedia: \(error)")
        throw Exit.ioError
    }
}

/// Writes `data` next to `path` and renames it into place, so readers never see half a file.
func writeAtomically(_ data: Data, to path: String) throws {
    let url = URL(fileURLWithPath: path)
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString.prefix(8)).tmp")
    try data.write(to: temporary)
    if rename(temporary.path, url.path) != 0 {
        let reason = String(cString: strerror(errno))
        unlink(temporary.path)
        throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot rename into \(path): \(reason)"])
    }
}

/// JSON for reports: sorted keys, pretty.
func reportJSON<T: Encodable>(_ value: T) throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    var data = try encoder.encode(value)
    data.append(0x0A)
    return data
}

/// One line for a person: what happened to a payload.
func humanLine(_ outcome: Outcome, label: String) -> String {
    var line = "\(label): \(outcome.status.rawValue)"
    if let reason = outcome.reason { line += " (\(reason))" }
    if let a = outcome.attachment {
        let size = [a.width, a.height].compactMap { $0 }.map(String.init).joined(separator: "×")
        line += " → \(a.url) [\(a.mime)\(size.isEmpty ? "" : " \(size)"), \(formatBytes(a.bytes))]"
    } else if let message = outcome.message, outcome.status != .processed {
        line += ": \(message)"
    }
    if let media = outcome.media, media.count > 1 {
        let others = media.dropFirst().map { "\($0.platform) \($0.status.rawValue)" }
        line += " (+\(media.count - 1) more: \(others.joined(separator: ", ")))"
    }
    line += String(format: " in %.0f ms", outcome.timingsMs.total)
    if outcome.cacheHit == true { line += " (cache)" }
    return line
}

func formatBytes(_ bytes: Int64) -> String {
    let value = Double(bytes)
    if abs(value) >= 1_000_000 { return String(format: "%.1f MB", value / 1_000_000) }
    if abs(value) >= 1_000 { return String(format: "%.1f kB", value / 1_000) }
    return "\(bytes) B"
}

extension FileHandle {
    static func writeError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
