import Foundation
import Logging
import PushMedia
import PushMediaFleet
import PushMediaRelay

/// Every rule `serve` checks before it binds a socket, in one place. `serve` runs it first (and
/// logs its warnings), `check-config` runs it alone, with the same messages; SIGHUP's reloads run
/// the parts they can change (`ServerConfig.checkHookExposure` for the settings,
/// `checkRelayExposure` for the relays' credentials). Reads the files the
/// settings name (the relays' credentials, TLS certificates and keys, the fleet's password
/// file) and connects to nothing.
public struct StartChecks: Sendable {
    /// Listeners that take anyone's requests because `--insecure-no-auth` says so: logged at start.
    public let warnings: [ExposureWarning]

    /// Throws the first rule `config` and `server` break: `ServerError`, `ExposureError`,
    /// `RelaySetupError`, `CredentialsError` or `FleetError`, each with its message.
    /// `environment` is what a credentials file's entries may name (passwords by variable).
    public init(config: PushMediaConfig, server: ServerConfig, environment: [String: String]) throws {
        var warnings = try server.checkHookExposure()
        // Settings that go together.
        _ = try server.urls.signingKeys()
        if server.fleetWorker > 0 && config.fleetDB == nil { throw ServerError.fleetWorkerWithoutFleet }
        _ = try FleetDatabase(config: config)
        try server.apns.validate()
        try server.fcm.validate()
        // What the relays hold decides who may reach them.
        let held = try RelayCredentials.held(config: server.relays, environment: environment)
        warnings += try server.checkRelayExposure(held: held)
        try server.relays.checkTLS()
        try server.tracing.checkAgainst(environment: environment)
        self.warnings = warnings
    }

    /// Each problem of an error `init` threw, one a line (a credentials file may have several).
    public static func lines(of error: any Error) -> [String] {
        if let credentials = error as? CredentialsError { return credentials.all.map(\.description) }
        if let config = error as? ConfigError { return config.problems.map(\.description) }
        return ["\(error)"]
    }

    /// Logs the warnings.
    public func log(to logger: Logger) {
        for warning in warnings { logger.warning("\(warning.message)", metadata: warning.metadata) }
    }
}

/// Who may reach one listener: its address, and whether anyone who reaches it could use it (no
/// token, client certificate or allow-list in the way). The one rule for the hook, its media
/// URLs and both relays: off loopback, a listener open to anyone opens only with
/// `--insecure-no-auth`, and then says so.
struct ListenerExposure: Sendable {
    enum Listener: Sendable {
        case hook
        case mediaURLs
        /// `signs`: it holds credentials, so anyone could push as those apps.
        case apns(signs: Bool)
        case fcm(signs: Bool)
    }

    let listener: Listener
    let host: String
    let openToAnyone: Bool

    /// Nil when the listener may open as configured; a warning when only `insecureNoAuth` lets
    /// it; throws when it may not.
    func check(insecureNoAuth: Bool) throws(ExposureError) -> ExposureWarning? {
        guard openToAnyone, !isLoopback(host) else { return nil }
        guard insecureNoAuth else { throw ExposureError(listener: listener, host: host) }
        switch listener {
        case .hook:
            return ExposureWarning(
                message: "the hook takes requests from anyone (--insecure-no-auth)", metadata: ["address": "\(host)"])
        case .mediaURLs:
            return ExposureWarning(
                message: "media URLs are made for any source unsigned (--insecure-no-auth)",
                metadata: ["address": "\(host)"])
        case let .apns(signs):
            return ExposureWarning(
                message: "the APNs relay takes pushes from anyone (--insecure-no-auth)",
                metadata: ["address": "\(host)", "signs": "\(signs)"])
        case let .fcm(signs):
            return ExposureWarning(
                message: "the FCM relay takes messages from anyone (--insecure-no-auth)",
                metadata: ["address": "\(host)", "signs": "\(signs)"])
        }
    }
}

/// A listener that takes anyone's requests, as `--insecure-no-auth` allows: said at start.
public struct ExposureWarning: Sendable {
    public let message: String
    public let metadata: Logger.Metadata
}

/// Why a listener may not open where it listens: anyone who reaches it could use it.
public struct ExposureError: Error, CustomStringConvertible {
    let listener: ListenerExposure.Listener
    let host: String

    public var description: String {
        switch listener {
        case .hook:
            "refusing to listen on \(host) without auth: give --token or --hmac-secret, or --insecure-no-auth to "
                + "accept anyone"
        case .mediaURLs:
            "refusing to serve unsigned media URLs for any source (--url-allow-source '*') on \(host): anyone could "
                + "make it fetch anything; list your CDN's prefixes, sign URLs with --url-key, or give "
                + "--insecure-no-auth"
        case .apns(signs: true):
            "refusing to run the APNs relay on \(host) with held credentials (--apns-key or --relay-credentials) "
                + "without --apns-client-ca: anyone could push as your apps; listen on loopback or require client "
                + "certificates"
        case .apns(signs: false):
            "refusing to run the APNs relay on \(host) without --apns-allow-team or --apns-client-ca: anyone could "
                + "relay through it; restrict it, or give --insecure-no-auth"
        case .fcm:
            "refusing to run the FCM relay on \(host) without --fcm-allow-project or --fcm-client-ca: anyone could "
                + "relay through it; restrict it, or give --insecure-no-auth"
        }
    }
}

/// Whether `host` is a loopback address (a listener there is reached only from this machine).
func isLoopback(_ host: String) -> Bool {
    ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) || host.hasPrefix("127.")
}

/// The address this machine reaches a listener on `host` at: the loopback address of a wildcard
/// (`0.0.0.0` or empty: 127.0.0.1; `::`: ::1), an IPv6 literal without its brackets, else `host`.
/// `serve`'s default base URL and `pushmedia health` use it.
public func reachableAddress(of host: String) -> String {
    switch host {
    case "0.0.0.0", "": "127.0.0.1"
    case "::", "[::]": "::1"
    default: host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }
}

extension ServerConfig {
    /// The hook: open to anyone without a token or an HMAC secret.
    var hookExposure: ListenerExposure {
        ListenerExposure(listener: .hook, host: host, openToAnyone: tokens.isEmpty && hmacSecret == nil)
    }

    /// Its media URLs: open to anyone when any source may be made unsigned.
    var mediaURLExposure: ListenerExposure {
        ListenerExposure(listener: .mediaURLs, host: host, openToAnyone: urls.openToEverything)
    }

    /// The APNs relay: open without client certificates when it signs with held credentials, or
    /// passes any team's own tokens through.
    func apnsExposure(holds: Bool) -> ListenerExposure {
        ListenerExposure(
            listener: .apns(signs: holds), host: apns.host,
            openToAnyone: apns.clientCA == nil
                && (holds || (credentials.passesThrough && apns.allowedTeams.isEmpty)))
    }

    /// The FCM relay: open without client certificates when it holds service accounts, or takes
    /// any project's messages.
    func fcmExposure(holds: Bool) -> ListenerExposure {
        ListenerExposure(
            listener: .fcm(signs: holds), host: fcm.host,
            openToAnyone: fcm.clientCA == nil && (fcm.allowedProjects.isEmpty || holds))
    }

    /// The rule for the hook: its auth and its media URLs' sources (what a settings reload
    /// changes, checked again then).
    @discardableResult
    func checkHookExposure() throws(ExposureError) -> [ExposureWarning] {
        try Self.check([hookExposure, mediaURLExposure], insecureNoAuth: insecureNoAuth)
    }

    /// The rule for the relays that run, holding `held` (checked again when the credentials
    /// file is reloaded).
    func checkRelayExposure(held: HeldCredentials) throws(ExposureError) -> [ExposureWarning] {
        var exposures: [ListenerExposure] = []
        if apns.port != nil { exposures.append(apnsExposure(holds: held.apns)) }
        if fcm.port != nil { exposures.append(fcmExposure(holds: held.fcm)) }
        return try Self.check(exposures, insecureNoAuth: insecureNoAuth)
    }

    private static func check(_ exposures: [ListenerExposure], insecureNoAuth: Bool) throws(ExposureError)
        -> [ExposureWarning]
    {
        var warnings: [ExposureWarning] = []
        for exposure in exposures {
            if let warning = try exposure.check(insecureNoAuth: insecureNoAuth) { warnings.append(warning) }
        }
        return warnings
    }
}
