import Foundation
import PushMedia
import PushMediaRelay

/// The media URLs' settings (`--url-*`), part of `ServerConfig` as `urls`. The endpoint is on when
/// a key or an allow-listed source is given (`enabled`).
public struct MediaURLConfig: Sendable, Equatable {
    /// `--url-key` (repeatable), `PUSHMEDIA_URL_KEY`: hex-encoded keys that sign media URLs,
    /// paired in order with `salts` (several pairs: rotation; the first signs).
    public var keys: [String] = []
    /// `--url-salt` (repeatable), `PUSHMEDIA_URL_SALT`: the hex-encoded salts.
    public var salts: [String] = []
    /// `--url-allow-source` (repeatable), `PUSHMEDIA_URL_ALLOW_SOURCE`: prefixes that unsigned
    /// media URLs' sources must start with (`*`: any source).
    public var allowedSources: [SourcePrefix] = []
    /// `--url-budget`, `PUSHMEDIA_URL_BUDGET`: one time budget for every profile; nil (the
    /// default): 10 s for `ios`, 3 s for the others (`budget(for:)`).
    public var budget: Duration?

    public init() {}

    /// Whether media URLs are served.
    public var enabled: Bool { !keys.isEmpty || !allowedSources.isEmpty }

    /// Whether any http(s) source may be fetched without a signature (`--url-allow-source '*'`).
    public var openToEverything: Bool { allowedSources.contains(where: \.matchesEverything) }

    /// The key and salt pairs, in order; throws when their numbers differ.
    public func signingKeys() throws(ServerError) -> [MediaURLKey] {
        guard keys.count == salts.count else {
            throw .mediaURLKeys("\(keys.count) --url-key and \(salts.count) --url-salt given: give them in pairs")
        }
        // Each was checked as hex when it was read.
        return zip(keys, salts).compactMap { MediaURLKey(hexKey: $0, hexSalt: $1) }
    }

    /// The budget of a request for `profile`: `--url-budget`, else 10 s for iOS (an NSE has about
    /// 30 s and must still download the file) and 3 s for the others (FCM on Android waits 5 s
    /// for the image, then shows the notification without it).
    public func budget(for profile: PlatformProfile) -> Duration {
        budget ?? (profile.id == PlatformProfile.ios.id ? .seconds(10) : .seconds(3))
    }

    /// The settings, appended to `ServerConfig.settings`.
    static let settings: [Setting<ServerConfig>] = [
        Setting(
            "url-key", "PUSHMEDIA_URL_KEY", .list, commands: [.serve], default: "none",
            help: "Hex key that signs media URLs (as imgproxy's); repeatable, paired in order with --url-salt"
        ) {
            config, value throws(ConfigError) in
            config.urls.keys += try hexItems(value, what: "key")
        }.reloadedOnSIGHUP(),
        Setting(
            "url-salt", "PUSHMEDIA_URL_SALT", .list, commands: [.serve], default: "none",
            help: "Hex salt of the --url-key at the same position; repeatable"
        ) {
            config, value throws(ConfigError) in
            config.urls.salts += try hexItems(value, what: "salt")
        }.reloadedOnSIGHUP(),
        Setting(
            "url-allow-source", "PUSHMEDIA_URL_ALLOW_SOURCE", .list, commands: [.serve], default: "none",
            help: "Serve unsigned media URLs for sources under this prefix (scheme://host[:port]/path, or * for any); "
                + "repeatable"
        ) {
            config, value throws(ConfigError) in
            for item in value.items {
                guard let prefix = SourcePrefix(item) else {
                    throw ConfigError.invalidValue(
                        name: value.name, value: item,
                        expected: "http(s)://host[:port][/path] without credentials, query or fragment, or *")
                }
                config.urls.allowedSources.append(prefix)
            }
        }.reloadedOnSIGHUP(),
        Setting(
            "url-budget", "PUSHMEDIA_URL_BUDGET", commands: [.serve], default: "10 s for `ios`, 3 s for the others",
            help: "Time budget of a media URL request, for every profile"
        ) {
            config, value throws(ConfigError) in
            config.urls.budget = try value.duration()
        }.reloadedOnSIGHUP(),
    ]

    /// The items of a key or salt setting, each checked as hex; the text is never shown.
    private static func hexItems(_ value: SettingText, what: String) throws(ConfigError) -> [String] {
        let items = value.items
        guard !items.isEmpty else { throw value.invalid(expected: "a hex-encoded \(what)", shown: "(hidden)") }
        for item in items where MediaURLKey(hexKey: item, hexSalt: item) == nil {
            throw value.invalid(expected: "a hex-encoded \(what) (an even number of 0-9, a-f)", shown: "(hidden)")
        }
        return items
    }
}
