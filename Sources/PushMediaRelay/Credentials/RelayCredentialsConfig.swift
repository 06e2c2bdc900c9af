import Foundation
import PushMedia

/// The relays' held credentials (`serve --relay-credentials …`), part of `RelaysConfig` as
/// `credentials`.
public struct RelayCredentialsConfig: Sendable, Equatable {
    /// `--relay-credentials`, `PUSHMEDIA_RELAY_CREDENTIALS`: the credentials file (YAML or JSON);
    /// nil: none (the `--apns-key` shorthand may still hold one key).
    public var path: String?
    /// `--relay-pass-through`, `PUSHMEDIA_RELAY_PASS_THROUGH`: a push for an app with no entry goes
    /// upstream with the client's own `authorization`; nil: on without a credentials file, off with one.
    public var passThrough: Bool?

    public init() {}

    /// Whether pass-through is on.
    public var passesThrough: Bool { passThrough ?? (path == nil) }

    /// The settings, part of `RelaysConfig.settings`.
    static let settings: [Setting<RelaysConfig>] = [
        .readableFile(
            "relay-credentials", "PUSHMEDIA_RELAY_CREDENTIALS", \.credentials.path, "a credentials file (YAML or JSON)"
        ) {
            "Hold the APNs keys and certificates and the FCM service accounts of many apps, from this file "
                + "(reloaded on SIGHUP)"
        },
        Setting(
            "relay-pass-through", "PUSHMEDIA_RELAY_PASS_THROUGH", .flag, commands: [.serve],
            default: "on without `--relay-credentials`, off with it",
            help: "Pass a client's own authorization upstream for an app the credentials file does not hold"
        ) {
            config, value throws(ConfigError) in
            config.credentials.passThrough = try value.bool()
        },
    ]
}
