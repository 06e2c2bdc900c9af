import ArgumentParser
import Foundation
import PushMedia
import PushMediaServer

/// Flags shared by every command: the settings of `PushMediaConfig.settings` that every command
/// takes. Each falls back to its `PUSHMEDIA_*` variable, then to the table's default.
struct SharedOptions: ParsableArguments, SettingFlags {
    @Option(name: .customLong("config"), help: .setting("config"))
    var configFile: String?
    @Option(help: .setting("store"))
    var store: String?
    @Option(name: .customLong("s3-endpoint"), help: .setting("s3-endpoint"))
    var s3Endpoint: String?
    @Option(name: .customLong("s3-region"), help: .setting("s3-region"))
    var s3Region: String?
    @Option(name: .customLong("work-dir"), help: .setting("work-dir"))
    var workDir: String?
    @Option(name: .customLong("index-cache"), help: .setting("index-cache"))
    var indexCache: String?
    @Option(name: .customLong("index-cache-ttl"), help: .setting("index-cache-ttl"))
    var indexCacheTTL: String?
    @Option(name: .customLong("min-ttl"), help: .setting("min-ttl"))
    var minTTL: String?
    @Option(name: .customLong("max-ttl"), help: .setting("max-ttl"))
    var maxTTL: String?
    @Option(name: .customLong("base-url"), help: .setting("base-url"))
    var baseURL: String?
    @Option(help: .setting("budget"))
    var budget: String?
    @Flag(name: .customLong("allow-private-networks"), help: .setting("allow-private-networks"))
    var allowPrivateNetworks = false
    @Option(name: .customLong("media-key"), help: .setting("media-key"))
    var mediaKey: [String] = []
    @Option(name: .customLong("trust-peer"), help: .setting("trust-peer"))
    var trustPeer: [String] = []
    @Option(name: .customLong("on-reject"), help: .setting("on-reject"))
    var onReject: String?
    @Option(name: .customLong("media-root"), help: .setting("media-root"))
    var mediaRoot: String?
    @Option(name: .customLong("long-edge"), help: .setting("long-edge"))
    var longEdge: String?
    @Option(name: .customLong("thumb-edge"), help: .setting("thumb-edge"))
    var thumbEdge: String?
    @Option(name: .customLong("max-pixels"), help: .setting("max-pixels"))
    var maxPixels: String?
    @Option(name: .customLong("max-frames"), help: .setting("max-frames"))
    var maxFrames: String?
    @Option(name: .customLong("max-source-bytes"), help: .setting("max-source-bytes"))
    var maxSourceBytes: String?
    @Option(name: .customLong("video-edge"), help: .setting("video-edge"))
    var videoEdge: String?
    @Option(name: .customLong("clip-seconds"), help: .setting("clip-seconds"))
    var clipSeconds: String?
    @Option(name: .customLong("decode-memory"), help: .setting("decode-memory"))
    var decodeMemory: String?
    @Option(name: .customLong("jpeg-quality"), help: .setting("jpeg-quality"))
    var jpegQuality: String?
    @Option(name: .customLong("connect-timeout"), help: .setting("connect-timeout"))
    var connectTimeout: String?
    @Option(name: .customLong("low-speed-time"), help: .setting("low-speed-time"))
    var lowSpeedTime: String?
    @Option(name: .customLong("max-redirects"), help: .setting("max-redirects"))
    var maxRedirects: String?
    @Option(help: .setting("profile"))
    var profile: String?
    @Option(help: .setting("vendor"))
    var vendor: String?
    @Option(help: .setting("crop"))
    var crop: String?
    @Option(name: .customLong("thumb-aspect"), help: .setting("thumb-aspect"))
    var thumbAspect: String?
    @Flag(name: .customLong("thumb-hidden"), help: .setting("thumb-hidden"))
    var thumbHidden = false

    static var settingNames: [String: String] { ["configFile": "config"] }

    /// Defaults, then the settings file (`--config`, else `PUSHMEDIA_CONFIG`), then the
    /// environment, then the flags.
    func config(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PushMediaConfig {
        try load(environment: environment).config
    }

    /// The library's settings as `config` reads them, and the settings file they came from, for
    /// a command's own table (`ServerConfig.fromSources`).
    func load(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> (
        config: PushMediaConfig, file: (path: String, entries: [(String, String)])?
    ) {
        do {
            let file = try (configFile ?? environment["PUSHMEDIA_CONFIG"]).map(SettingsFile.read)
            var config = try PushMediaConfig.fromSources(file: file, environment: environment)
            try config.apply(given)
            return (config, file)
        } catch { throw ValidationError(error.description) }
    }
}

/// Opens the pipeline on the command's `ProcessResources`, built here once, and checks its store
/// (an object store must answer with its bucket); a store that cannot be opened or reached is an
/// I/O error (exit 74) with a message naming it.
func openPipeline(_ config: PushMediaConfig) async throws -> Pipeline {
    do {
        let pipeline = try Pipeline(config: config, resources: ProcessResources(config: config))
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
    let temporary = url.deletingLastPathComponent().appendingPathComponent(
        ".\(url.lastPathComponent).\(UUID().uuidString.prefix(8)).tmp")
    try data.write(to: temporary)
    if rename(temporary.path, url.path) != 0 {
        let reason = String(cString: strerror(errno))
        unlink(temporary.path)
        throw CocoaError(
            .fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot rename into \(path): \(reason)"])
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

/// A file error in plain words: the system's own for the errno underneath (`Is a directory`,
/// `Permission denied`, `No such file or directory`), never Foundation's wrapper text.
func plainWords(_ error: any Error) -> String {
    var current = error as NSError
    while true {
        if current.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(current.code))) }
        guard let underlying = current.userInfo[NSUnderlyingErrorKey] as? NSError else { break }
        current = underlying
    }
    if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
    return current.localizedDescription
}
