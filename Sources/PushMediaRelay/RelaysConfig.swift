import PushMedia

/// The relays' settings (`serve --apns-* --fcm-* --relay-*`), part of `serve`'s as
/// `ServerConfig.relays`: each relay's listener and upstream, the held credentials, and the
/// bounds every relay keeps. `settings` declares each one's flag, `PUSHMEDIA_*` variable,
/// documented default and help.
public struct RelaysConfig: Configurable, Equatable {
    /// The APNs relay (`--apns-*`); off unless `apns.port` is set.
    public var apns = APNsRelayConfig()
    /// The FCM relay (`--fcm-*`); off unless `fcm.port` is set.
    public var fcm = FCMRelayConfig()
    /// The held credentials (`--relay-credentials`, `--relay-pass-through`).
    public var credentials = RelayCredentialsConfig()
    /// The listeners' and upstreams' bounds (`--relay-*`).
    public var limits = RelayLimits()

    public init() {}

    /// Every relay setting, as `serve --help` lists them.
    public static let settings: [Setting<RelaysConfig>] =
        APNsRelayConfig.settings + FCMRelayConfig.settings + RelayCredentialsConfig.settings + RelayLimits.settings

    /// Whether either relay runs.
    public var running: Bool { apns.port != nil || fcm.port != nil }
}
