import Foundation
import PushMedia

/// The APNs relay's settings (`serve --apns-port …`), part of `RelaysConfig` as `apns`. The relay
/// is off unless `port` is set.
@dynamicMemberLookup
public struct APNsRelayConfig: Sendable, Equatable {
    /// `--apns-port`, `-host`, `-tls-cert`, `-tls-key`, `-client-ca`, `-upstream-ca`, `-budget`,
    /// `-upstream-timeout`: the listener's settings, read as this value's own (`port`, `budget`…).
    public var listener = RelayListenerSettings()
    /// `--apns-allow-team` (repeatable): teams (`iss` of the provider token) that may push.
    public var allowedTeams: [String] = []
    /// `--apns-upstream`: `production`, `development` or an `https://host[:port]` URL.
    public var upstream = "production"
    /// `--apns-key`, `--apns-key-id`, `--apns-team-id`: sign provider tokens with this `.p8` key
    /// instead of passing the client's through.
    public var key: String?
    public var keyID: String?
    public var teamID: String?

    public init() {}

    /// The listener's settings, as this value's own fields.
    public subscript<Value>(dynamicMember field: WritableKeyPath<RelayListenerSettings, Value>) -> Value {
        get { listener[keyPath: field] }
        set { listener[keyPath: field] = newValue }
    }

    /// The upstream's host and port.
    public typealias Upstream = UpstreamEndpoint

    /// `upstream` resolved: Apple's production or development host, or the URL's.
    public var upstreamEndpoint: Upstream {
        switch upstream {
        case "production": return Upstream(host: "api.push.apple.com", port: 443)
        case "development": return Upstream(host: "api.sandbox.push.apple.com", port: 443)
        default: return UpstreamEndpoint(url: upstream) ?? Upstream(host: upstream, port: 443)
        }
    }

    /// Whether the relay signs its own tokens.
    public var ownKey: Bool { key != nil }

    /// The relay's settings, part of `RelaysConfig.settings`.
    static let settings: [Setting<RelaysConfig>] =
        listenerSettings(\.apns) + [
            Setting(
                "apns-allow-team", "PUSHMEDIA_APNS_ALLOW_TEAMS", .list, commands: [.serve], default: "none",
                help: "A team ID (the provider token's iss) that may push through the relay; repeatable"
            ) {
                config, value throws(ConfigError) in
                for team in value.items {
                    guard team.utf8.count <= 64, team.allSatisfy({ $0.isLetter || $0.isNumber }) else {
                        throw value.invalid(expected: "a team ID such as ABCDE12345")
                    }
                    config.apns.allowedTeams.append(team)
                }
            },
            Setting(
                "apns-upstream", "PUSHMEDIA_APNS_UPSTREAM", commands: [.serve], default: "`production`",
                help: "Where pushes go: production, development or https://host[:port]"
            ) {
                config, value throws(ConfigError) in
                guard ["production", "development"].contains(value.text) || UpstreamEndpoint(url: value.text) != nil
                else {
                    throw value.invalid(expected: "production, development or https://host[:port]")
                }
                config.apns.upstream = value.text
            },
            .readableFile("apns-key", "PUSHMEDIA_APNS_KEY", \.apns.key, "an AuthKey_<id>.p8 file") {
                "Sign provider tokens with this .p8 key instead of passing the client's through"
            },
            identifier("apns-key-id", "PUSHMEDIA_APNS_KEY_ID", \.apns.keyID, "ABC123DEFG") {
                "The key ID (kid) of --apns-key"
            },
            identifier("apns-team-id", "PUSHMEDIA_APNS_TEAM_ID", \.apns.teamID, "ABCDE12345") {
                "The team ID (iss) of --apns-key"
            },
        ]

    /// An Apple identifier: letters and digits, at most 64.
    private static func identifier(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<RelaysConfig, String?> & Sendable,
        _ example: String, help: () -> String
    ) -> Setting<RelaysConfig> {
        Setting(name, environment, commands: [.serve], default: "none", help: help()) {
            config, value throws(ConfigError) in
            guard !value.text.isEmpty, value.text.utf8.count <= 64,
                value.text.allSatisfy({ $0.isLetter || $0.isNumber })
            else { throw value.invalid(expected: "letters and digits, such as \(example)") }
            config[keyPath: keyPath] = value.text
        }
    }

    /// Settings that only make sense together: the listener's, and the key with its ID and team.
    public func validate() throws(RelaySetupError) {
        guard listener.port != nil else { return }
        try checkListenerPairs()
        if key != nil || keyID != nil || teamID != nil, key == nil || keyID == nil || teamID == nil {
            throw .incomplete("--apns-key, --apns-key-id and --apns-team-id go together")
        }
    }
}
