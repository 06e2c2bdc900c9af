import Foundation
import NIOSSL
import PushMedia

// What the relays (`APNs/`, `FCM/`) share besides their HTTP/2 client: settings naming files,
// the loopback rule, the server's TLS and the reasons they do not start.

extension Setting where Config == ServerConfig {
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

/// Whether `host` is a loopback address (a relay there may take pushes without restriction).
func isLoopback(_ host: String) -> Bool {
    ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) || host.hasPrefix("127.")
}

/// A relay listener's TLS: the certificate chain and key (PEM), ALPN `protocols`, and with
/// `clientCA` only clients holding a certificate it signed.
func serverTLS(certificate: String, key: String, clientCA: String?, protocols: [String], what: String)
    throws(RelaySetupError) -> TLSConfiguration
{
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
    return tls
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
                ? "refusing to run the APNs relay on \(host) with --apns-key without --apns-client-ca: anyone could "
                    + "push as your team; listen on loopback or require client certificates"
                : "refusing to run the APNs relay on \(host) without --apns-allow-team or --apns-client-ca: anyone "
                    + "could relay through it; restrict it, or give --insecure-no-auth"
        case let .unrestrictedFCM(host):
            "refusing to run the FCM relay on \(host) without --fcm-allow-project or --fcm-client-ca: anyone could "
                + "relay through it; restrict it, or give --insecure-no-auth"
        }
    }
}
