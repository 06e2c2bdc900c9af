import Foundation
import PushMedia

/// The FCM relay's settings (`serve --fcm-port …`), part of `RelaysConfig` as `fcm`. The relay is
/// off unless `port` is set.
@dynamicMemberLookup
public struct FCMRelayConfig: Sendable, Equatable {
    /// `--fcm-port`, `-host`, `-tls-cert`, `-tls-key`, `-client-ca`, `-upstream-ca`, `-budget`,
    /// `-upstream-timeout`: the listener's settings, read as this value's own (`port`, `budget`…).
    public var listener = RelayListenerSettings()
    /// `--fcm-allow-project` (repeatable): Firebase projects that may send through the relay.
    public var allowedProjects: [String] = []
    /// `--fcm-upstream`: `https://host[:port]`: Google's `https://fcm.googleapis.com`.
    public var upstream = "https://fcm.googleapis.com"

    public init() {}

    /// The listener's settings, as this value's own fields.
    public subscript<Value>(dynamicMember field: WritableKeyPath<RelayListenerSettings, Value>) -> Value {
        get { listener[keyPath: field] }
        set { listener[keyPath: field] = newValue }
    }

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
        guard listener.port != nil else { return }
        try checkListenerPairs()
    }
}
