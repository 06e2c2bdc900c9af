import Crypto
import Foundation
import Logging
import PushMedia

/// The settings `serve` changes without a restart (on SIGHUP, `SettingsReload`): the hook's
/// tokens and HMAC secret, the media URLs' keys, salts, allow-list and budget. Read per request.
public final class LiveSettings: Sendable {
    struct Values: Sendable {
        /// SHA-256 of each bearer token (compared digest to digest, in constant time).
        var tokenDigests: [[UInt8]]
        var secret: [UInt8]?
        var urls: MediaURLConfig
        var urlKeys: [MediaURLKey]
        /// Counts the updates: what was checked against these values holds while it is the same.
        var generation = 0
    }

    /// The settings SIGHUP applies (their rows say so: `Setting.reloads`): these, and the log level.
    public static let names = Set(ServerConfig.settings.filter(\.reloads).map(\.name))

    private let values: Locked<Values>

    init(_ server: ServerConfig) throws(ServerError) {
        values = Locked(try Self.values(server))
    }

    var current: Values { values.withLock { $0 } }

    /// Takes `server`'s values, after the checks `serve` makes at start of the settings a reload
    /// changes (`ServerConfig.checkHookExposure`): a public listener keeps some auth, and its media
    /// URLs are not open to every source, unless `--insecure-no-auth`.
    func update(_ server: ServerConfig) throws {
        try server.checkHookExposure()
        var new = try Self.values(server)
        values.withLock {
            new.generation = $0.generation + 1
            $0 = new
        }
    }

    private static func values(_ server: ServerConfig) throws(ServerError) -> Values {
        Values(
            tokenDigests: server.tokens.map { Array(SHA256.hash(data: Data($0.utf8))) },
            secret: server.hmacSecret.map { Array($0.utf8) }, urls: server.urls, urlKeys: try server.urls.signingKeys())
    }
}

/// What the settings' sources say: the configurations they make and each setting's texts (as
/// its flags, else its variable, else the settings file give it), to tell what a reload changed.
public struct SettingsSnapshot: Sendable {
    public var library: PushMediaConfig
    public var server: ServerConfig
    /// Each setting's texts, by name.
    public var texts: [String: [String]]

    public init(library: PushMediaConfig, server: ServerConfig, texts: [String: [String]]) {
        self.library = library
        self.server = server
        self.texts = texts
    }
}

/// SIGHUP for the settings: reads the sources again (`read`: the settings file; the environment
/// and flags are the process's own), takes the live settings (`LiveSettings`) and the log level,
/// and says which other changed settings need a restart. A file that does not read or check
/// keeps what is in force, and says why.
struct SettingsReload: Reloadable {
    let read: @Sendable () throws -> SettingsSnapshot
    let live: LiveSettings
    let sink: LogSink?
    let logger: Logger
    let started: Locked<SettingsSnapshot>

    init(
        start: SettingsSnapshot, read: @escaping @Sendable () throws -> SettingsSnapshot, live: LiveSettings,
        sink: LogSink?, logger: Logger
    ) {
        self.read = read
        self.live = live
        self.sink = sink
        self.logger = logger
        started = Locked(start)
    }

    var reloadName: String { "settings" }

    func reload() throws {
        let snapshot: SettingsSnapshot
        do {
            snapshot = try read()
            try live.update(snapshot.server)
        } catch {
            logger.error("settings not reloaded, those in force kept", metadata: ["why": "\(error)"])
            throw error
        }
        sink?.level.withLock { $0 = snapshot.server.logLevel }
        let before = started.withLock { old in
            defer { old = snapshot }
            return old
        }
        let changed = Set(before.texts.keys).union(snapshot.texts.keys).filter {
            before.texts[$0] != snapshot.texts[$0]
        }
        let applied = changed.filter(LiveSettings.names.contains).sorted()
        let pending = changed.subtracting(applied).sorted()
        logger.notice("settings reloaded", metadata: ["changed": "\(applied.joined(separator: ","))"])
        if !pending.isEmpty {
            logger.warning(
                "these settings change only with a restart", metadata: ["settings": "\(pending.joined(separator: ","))"]
            )
        }
    }
}
