import Foundation
import NIOSSL
import PushMedia

// What the listeners share besides the relays' HTTP/2 client: settings naming addresses and
// files, the loopback rule, the headers a relay does not pass on, the relays' server TLS and the
// reasons they do not start.

extension Setting where Config == ServerConfig {
    /// A listener's address.
    static func address(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<ServerConfig, String> & Sendable,
        default documentedDefault: String = "`127.0.0.1`", example: String = "0.0.0.0", help: String
    ) -> Setting<ServerConfig> {
        Setting(name, environment, commands: [.serve], default: documentedDefault, help: help) {
            config, value throws(ConfigError) in
            guard !value.text.isEmpty else {
                throw value.invalid(expected: "an address such as 127.0.0.1 or \(example)")
            }
            config[keyPath: keyPath] = value.text
        }
    }

    /// A setting naming a readable file.
    static func readableFile(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<ServerConfig, String?> & Sendable,
        _ expected: String, help: () -> String
    ) -> Setting<ServerConfig> {
        Setting(name, environment, commands: [.serve], default: "none", help: help()) {
            config, value throws(ConfigError) in
            guard FileManager.default.isReadableFile(atPath: value.text) else {
                throw value.invalid(expected: "a readable file: \(expected)")
            }
            config[keyPath: keyPath] = value.text
        }
    }
}

/// Headers of a connection rather than of the request, which a relay does not pass on: HTTP/2
/// pseudo-headers (set anew) and HTTP/1's hop-by-hop ones (`content-length` is set for the body
/// sent).
func isConnectionHeader(_ name: String) -> Bool {
    if name.hasPrefix(":") { return true }
    switch name.lowercased() {
    case "content-length", "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
        "http2-settings":
        return true
    default: return false
    }
}

/// Whether `host` is a loopback address (a relay there may take pushes without restriction).
func isLoopback(_ host: String) -> Bool {
    ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) || host.hasPrefix("127.")
}

/// A relay listener's TLS: the certificate chain and key (PEM), ALPN `protocols`, and with
/// `clientCA` only clients holding a certificate it signed; nil without a certificate (cleartext).
/// `what` names the settings in errors.
func serverTLS(certificate: String?, key: String?, clientCA: String?, protocols: [String], what: String)
    throws(RelaySetupError) -> NIOSSLContext?
{
    guard let certificate, let key else { return nil }
    var tls: TLSConfiguration
    do {
        tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
    } catch {
        throw .unreadable(what: what, path: certificate, why: "\(error)")
    }
    tls.applicationProtocols = protocols
    tls.minimumTLSVersion = .tlsv12
    if let clientCA {
        tls.trustRoots = .file(clientCA)
        tls.certificateVerification = .noHostnameVerification
    }
    do { return try NIOSSLContext(configuration: tls) } catch {
        throw .unreadable(what: what, path: certificate, why: "\(error)")
    }
}

/// Why the relay cannot start.
public enum RelaySetupError: Error, CustomStringConvertible {
    case incomplete(String)
    case unreadable(what: String, path: String, why: String)
    case unrestricted(host: String, ownKey: Bool)
    case unrestrictedFCM(host: String)

    public var description: String {
        switch self {
        case let .incomplete(message): message
        case let .unreadable(what, path, why): "\(what) \(path): \(why)"
        case let .unrestricted(host, ownKey):
            ownKey
                ? "refusing to run the APNs relay on \(host) with held credentials (--apns-key or "
                    + "--relay-credentials) without --apns-client-ca: anyone could push as your apps; listen on "
                    + "loopback or require client certificates"
                : "refusing to run the APNs relay on \(host) without --apns-allow-team or --apns-client-ca: anyone "
                    + "could relay through it; restrict it, or give --insecure-no-auth"
        case let .unrestrictedFCM(host):
            "refusing to run the FCM relay on \(host) without --fcm-allow-project or --fcm-client-ca: anyone could "
                + "relay through it; restrict it, or give --insecure-no-auth"
        }
    }
}
