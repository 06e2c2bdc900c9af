import Foundation
import NIOSSL
import PushMedia

// What the listeners share besides the relays' HTTP/2 client: settings naming addresses and
// files, the headers a relay does not pass on and the reasons they do not start.

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

/// Why the relay cannot start.
public enum RelaySetupError: Error, CustomStringConvertible {
    case incomplete(String)
    case unreadable(what: String, path: String, why: String)

    public var description: String {
        switch self {
        case let .incomplete(message): message
        case let .unreadable(what, path, why): "\(what) \(path): \(why)"
        }
    }
}
