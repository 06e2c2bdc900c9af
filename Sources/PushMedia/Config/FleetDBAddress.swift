import Foundation

/// `--fleet-db`: where a fleet's PostgreSQL database is, as libpq's URIs write it:
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE]` (MODE `disable`, `prefer`,
/// `require` or `verify-full`; `prefer` by default, as libpq's). The password never shows in a
/// message (`redacted`).
public struct FleetDBAddress: Sendable, Equatable {
    public enum TLSMode: String, Sendable, CaseIterable {
        /// No TLS.
        case disable
        /// TLS when the server offers it, without checking its certificate (libpq's default).
        case prefer
        /// TLS or no connection, without checking the certificate.
        case require
        /// TLS with the certificate checked against the system's roots (or `sslrootcert`) and the host.
        case verifyFull = "verify-full"
    }

    /// Why an address was refused: what would have been accepted.
    public struct Invalid: Error, Sendable {
        public let expected: String
    }

    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// `sslrootcert`: a PEM file of the roots to check the server's certificate against.
    public var rootCertificates: String?

    public init(_ text: String) throws(Invalid) {
        let form = "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require|verify-full]"
        guard let parts = URLComponents(string: text), let scheme = parts.scheme?.lowercased(),
            ["postgres", "postgresql"].contains(scheme)
        else { throw Invalid(expected: form) }
        guard let host = parts.host, !host.isEmpty else { throw Invalid(expected: "a host: \(form)") }
        guard let user = parts.user, !user.isEmpty else { throw Invalid(expected: "a user: \(form)") }
        let database = String(parts.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw Invalid(expected: "a database: \(form)") }
        var tls = TLSMode.prefer
        var roots: String?
        for item in parts.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let mode = item.value.flatMap(TLSMode.init(rawValue:)) else {
                    throw Invalid(expected: "sslmode disable, prefer, require or verify-full")
                }
                tls = mode
            case "sslrootcert":
                guard let path = item.value, !path.isEmpty else { throw Invalid(expected: "sslrootcert=FILE") }
                roots = path
            default:
                throw Invalid(expected: "only sslmode and sslrootcert after `?`, not \(item.name)")
            }
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        self.port = parts.port ?? 5432
        self.user = user.removingPercentEncoding ?? user
        self.password = parts.password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database.removingPercentEncoding ?? database
        self.tls = tls
        self.rootCertificates = roots
    }

    /// The address as messages and logs show it: the password replaced by `***`.
    public static func redacted(_ text: String) -> String {
        guard var parts = URLComponents(string: text), parts.password != nil else {
            // Not parsable: keep nothing between `://` and `@`, where a password could be.
            guard let scheme = text.range(of: "://"), let at = text.range(of: "@", options: .backwards),
                scheme.upperBound <= at.lowerBound
            else { return text }
            return text[..<scheme.upperBound] + "***" + text[at.lowerBound...]
        }
        parts.password = "***"
        return parts.string ?? "***"
    }

    /// `host:port/database` as user `user`, for messages.
    public var described: String {
        "\(user)@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)"
    }
}
