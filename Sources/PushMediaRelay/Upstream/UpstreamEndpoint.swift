import Foundation

/// Where a relay sends: host and port of an HTTPS server speaking HTTP/2.
public struct UpstreamEndpoint: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// The `:authority` sent.
    public var authority: String { port == 443 ? host : "\(host):\(port)" }

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// An `https://host[:port]` URL's endpoint (port 443 when none is given).
    public init?(url text: String) {
        guard let url = URL(string: text), url.scheme == "https", let host = url.host, !host.isEmpty,
            url.path.isEmpty || url.path == "/", url.query == nil
        else { return nil }
        self.init(host: host, port: url.port ?? 443)
    }
}
