import Foundation
import PushMedia

/// The APNs relay's settings (`serve --apns-port …`), part of `RelaysConfig` as `apns`. The relay
/// is off unless `port` is set.
public struct APNsRelayConfig: Sendable, Equatable {
    /// `--apns-port`, `PUSHMEDIA_APNS_PORT`: port of the relay's HTTP/2 listener (0 picks a free
    /// one); nil (the default): no relay.
    public var port: Int?
    /// `--apns-host`, `PUSHMEDIA_APNS_HOST`: its address: 127.0.0.1.
    public var host = "127.0.0.1"
    /// `--apns-tls-cert`, `--apns-tls-key`: PEM certificate chain and key; without them the relay
    /// speaks cleartext HTTP/2 with prior knowledge (h2c), for a sidecar on loopback.
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// `--apns-client-ca`: accept only clients with a certificate signed by this CA (mutual TLS).
    public var clientCA: String?
    /// `--apns-allow-team` (repeatable): teams (`iss` of the provider token) that may push.
    public var allowedTeams: [String] = []
    /// `--apns-upstream`: `production`, `development` or an `https://host[:port]` URL.
    public var upstream = "production"
    /// `--apns-upstream-ca`: an extra CA trusted for the upstream (a private egress proxy).
    public var upstreamCA: String?
    /// `--apns-key`, `--apns-key-id`, `--apns-team-id`: sign provider tokens with this `.p8` key
    /// instead of passing the client's through.
    public var key: String?
    public var keyID: String?
    public var teamID: String?
    /// `--apns-budget`: time a rich push may spend on its media before it goes on: 2 s.
    public var budget: Duration = .seconds(2)
    /// `--apns-upstream-timeout`: connecting to and hearing from the upstream: 10 s.
    public var upstreamTimeout: Duration = .seconds(10)

    public init() {}

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
        guard port != nil else { return }
        try checkListenerPairs()
        if key != nil || keyID != nil || teamID != nil, key == nil || keyID == nil || teamID == nil {
            throw .incomplete("--apns-key, --apns-key-id and --apns-team-id go together")
        }
    }
}
