import Foundation
import PushMedia

/// The FCM relay's settings (`serve --fcm-port …`), part of `RelaysConfig` as `fcm`. The relay is
/// off unless `port` is set.
public struct FCMRelayConfig: Sendable, Equatable {
    /// `--fcm-port`, `PUSHMEDIA_FCM_PORT`: port of the relay's listener (0 picks a free one); nil
    /// (the default): no relay.
    public var port: Int?
    /// `--fcm-host`, `PUSHMEDIA_FCM_HOST`: its address: 127.0.0.1.
    public var host = "127.0.0.1"
    /// `--fcm-tls-cert`, `--fcm-tls-key`: PEM certificate chain and key (HTTP/1.1 and HTTP/2 by
    /// ALPN); without them, cleartext HTTP/1.1 and h2c (prior knowledge) for a sidecar on loopback.
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// `--fcm-client-ca`: accept only clients with a certificate signed by this CA.
    public var clientCA: String?
    /// `--fcm-allow-project` (repeatable): Firebase projects that may send through the relay.
    public var allowedProjects: [String] = []
    /// `--fcm-upstream`: `https://host[:port]`: Google's `https://fcm.googleapis.com`.
    public var upstream = "https://fcm.googleapis.com"
    /// `--fcm-upstream-ca`: an extra CA trusted for the upstream.
    public var upstreamCA: String?
    /// `--fcm-budget`: time a message may spend on its media before it goes on: 2 s.
    public var budget: Duration = .seconds(2)
    /// `--fcm-upstream-timeout`: connecting to and hearing from the upstream: 10 s.
    public var upstreamTimeout: Duration = .seconds(10)

    public init() {}

    /// `upstream` resolved.
    public var upstreamEndpoint: UpstreamEndpoint {
        UpstreamEndpoint(url: upstream) ?? UpstreamEndpoint(host: "fcm.googleapis.com", port: 443)
    }

    /// The relay's settings, part of `RelaysConfig.settings`.
    static let settings: [Setting<RelaysConfig>] =
        listenerSettings(\.fcm) + [
            Setting(
                "fcm-allow-project", "PUSHMEDIA_FCM_ALLOW_PROJECTS", .list, commands: [.serve], default: "none",
                help: "A Firebase project ID that may send through the FCM relay; repeatable"
            ) {
                config, value throws(ConfigError) in
                for project in value.items {
                    guard project.utf8.count <= 128, project.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" })
                    else {
                        throw value.invalid(expected: "a project ID such as my-app-1234")
                    }
                    config.fcm.allowedProjects.append(project)
                }
            },
            Setting(
                "fcm-upstream", "PUSHMEDIA_FCM_UPSTREAM", commands: [.serve], default: "`https://fcm.googleapis.com`",
                help: "Where messages go: https://host[:port]"
            ) {
                config, value throws(ConfigError) in
                guard UpstreamEndpoint(url: value.text) != nil else {
                    throw value.invalid(expected: "https://host[:port]")
                }
                config.fcm.upstream = value.text
            },
        ]

    /// Settings that only make sense together.
    public func validate() throws(RelaySetupError) {
        guard port != nil else { return }
        try checkListenerPairs()
    }
}
