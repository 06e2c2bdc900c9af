import Foundation
import NIOSSL
import PushMedia

/// What each relay's listener is given: its address, its TLS, its upstream's extra CA, and how
/// long a push may take. One value for both relays (`APNsRelayConfig.listener`,
/// `FCMRelayConfig.listener`), read through them as their own fields (`config.apns.port`).
public struct RelayListenerSettings: Sendable, Equatable {
    /// `--<relay>-port`: the listener's port (0 picks a free one); nil (the default): no relay.
    public var port: Int?
    /// `--<relay>-host`: its address: 127.0.0.1.
    public var host = "127.0.0.1"
    /// `--<relay>-tls-cert`, `--<relay>-tls-key`: PEM certificate chain and key; without them the
    /// relay speaks cleartext, for a sidecar on loopback.
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// `--<relay>-client-ca`: accept only clients with a certificate signed by this CA (mutual TLS).
    public var clientCA: String?
    /// `--<relay>-upstream-ca`: an extra CA trusted for the upstream (a private egress proxy).
    public var upstreamCA: String?
    /// `--<relay>-budget`: time a push may spend on its media before it goes on: 2 s.
    public var budget: Duration = .seconds(2)
    /// `--<relay>-upstream-timeout`: connecting to and hearing from the upstream: 10 s.
    public var upstreamTimeout: Duration = .seconds(10)

    public init() {}
}

/// A relay's settings (`APNsRelayConfig`, `FCMRelayConfig`): its listener's, and what is its own.
protocol RelayListenerConfig: Sendable {
    /// The relay in flags (`apns`, `fcm`): `--<relay>-tls-cert`, …
    static var flagPrefix: String { get }
    /// The relay in help texts: `APNs`, `FCM`.
    static var title: String { get }
    /// The API it serves, and what it speaks without TLS, for help texts.
    static var api: String { get }
    static var cleartext: String { get }
    /// ALPN protocols offered over TLS, best first.
    static var protocols: [String] { get }
    var listener: RelayListenerSettings { get set }
    /// Where pushes go.
    var upstreamEndpoint: UpstreamEndpoint { get }
    /// Throws when settings that only make sense together are not given together.
    func validate() throws(RelaySetupError)
}

extension RelayListenerConfig {
    /// The listener's settings that go together: the certificate with its key, a client CA with both.
    func checkListenerPairs() throws(RelaySetupError) {
        let flag = "--\(Self.flagPrefix)"
        if (listener.tlsCertificate == nil) != (listener.tlsKey == nil) {
            throw .incomplete("\(flag)-tls-cert and \(flag)-tls-key go together")
        }
        if listener.clientCA != nil && listener.tlsCertificate == nil {
            throw .incomplete("\(flag)-client-ca needs \(flag)-tls-cert and \(flag)-tls-key")
        }
    }

    /// How long the pushes in flight may take once shutdown begins: a whole budget and upstream
    /// exchange, and a second.
    var drainLimit: Duration { listener.budget + listener.upstreamTimeout + .seconds(1) }

    /// The listener's TLS: the certificate chain and key (PEM), ALPN `protocols`, and with
    /// `clientCA` only clients holding a certificate it signed; nil without a certificate
    /// (cleartext).
    func serverTLS() throws(RelaySetupError) -> NIOSSLContext? {
        guard let certificate = listener.tlsCertificate, let key = listener.tlsKey else { return nil }
        let what = "--\(Self.flagPrefix)-tls-cert/--\(Self.flagPrefix)-tls-key"
        var tls: TLSConfiguration
        do {
            tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        } catch {
            throw .unreadable(what: what, path: certificate, why: "\(error)")
        }
        tls.applicationProtocols = Self.protocols
        tls.minimumTLSVersion = .tlsv12
        if let clientCA = listener.clientCA {
            tls.trustRoots = .file(clientCA)
            tls.certificateVerification = .noHostnameVerification
        }
        do { return try NIOSSLContext(configuration: tls) } catch {
            throw .unreadable(what: what, path: certificate, why: "\(error)")
        }
    }
}

extension RelayListenerConfig {
    /// The settings every relay's listener has (`--<relay>-port`, `-host`, `-tls-cert`,
    /// `-tls-key`, `-client-ca`, `-upstream-ca`, `-budget`, `-upstream-timeout`, and their
    /// `PUSHMEDIA_<RELAY>_*` variables), for the relay at `relay`: one set of rows for both.
    static func listenerSettings(_ relay: WritableKeyPath<RelaysConfig, Self> & Sendable) -> [Setting<RelaysConfig>] {
        let (flag, variable) = (flagPrefix, "PUSHMEDIA_\(flagPrefix.uppercased())_")
        return [
            .integer(
                "\(flag)-port", variable + "PORT", field(relay, \.listener.port), in: 0...65535, commands: [.serve],
                default: "none", help: "Open the \(title) relay (\(api)) on this port; 0 for any free one"),
            .address(
                "\(flag)-host", variable + "HOST", field(relay, \.listener.host), help: "Address of the \(title) relay"),
            .readableFile(
                "\(flag)-tls-cert", variable + "TLS_CERT", field(relay, \.listener.tlsCertificate),
                "a PEM certificate chain"
            ) {
                "The \(title) relay's TLS certificate chain (PEM); without it and --\(flag)-tls-key: cleartext \(cleartext)"
            },
            .readableFile("\(flag)-tls-key", variable + "TLS_KEY", field(relay, \.listener.tlsKey), "a PEM private key")
            {
                "The \(title) relay's TLS private key (PEM)"
            },
            .readableFile(
                "\(flag)-client-ca", variable + "CLIENT_CA", field(relay, \.listener.clientCA), "a PEM CA certificate"
            ) {
                "Require the \(title) relay's clients to hold certificates signed by this CA (mutual TLS)"
            },
            .readableFile(
                "\(flag)-upstream-ca", variable + "UPSTREAM_CA", field(relay, \.listener.upstreamCA),
                "a PEM CA certificate"
            ) { "Also trust this CA (PEM) for the \(title) upstream" },
            .duration(
                "\(flag)-budget", variable + "BUDGET", field(relay, \.listener.budget), commands: [.serve],
                help: "Time a push may wait for its media; past it the best attempt goes upstream"),
            .duration(
                "\(flag)-upstream-timeout", variable + "UPSTREAM_TIMEOUT", field(relay, \.listener.upstreamTimeout),
                commands: [.serve],
                help: "Answer 503 when the \(title) upstream has not connected or answered in this time"),
        ]
    }

    /// `relay` then `field`. Both are sendable, so the path they make is too; the compiler
    /// cannot tell that of an appended path.
    private static func field<Value>(
        _ relay: WritableKeyPath<RelaysConfig, Self> & Sendable, _ field: WritableKeyPath<Self, Value> & Sendable
    ) -> WritableKeyPath<RelaysConfig, Value> & Sendable {
        unsafeBitCast(relay.appending(path: field), to: (WritableKeyPath<RelaysConfig, Value> & Sendable).self)
    }
}

extension APNsRelayConfig: RelayListenerConfig {
    static let flagPrefix = "apns"
    static let title = "APNs"
    static let api = "Apple's provider API, HTTP/2"
    static let cleartext = "HTTP/2 (h2c)"
    /// Apple's provider API is HTTP/2 only.
    static let protocols = ["h2"]
}

extension FCMRelayConfig: RelayListenerConfig {
    static let flagPrefix = "fcm"
    static let title = "FCM"
    static let api = "FCM HTTP v1 messages:send"
    static let cleartext = "HTTP/1.1 and h2c"
    /// FCM's clients speak HTTP/2 and HTTP/1.1.
    static let protocols = ["h2", "http/1.1"]
}
