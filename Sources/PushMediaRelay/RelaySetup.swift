import Foundation
import NIOSSL
import PushMedia

// What the relays' listeners share besides their HTTP/2 client: the headers a relay does not
// pass on and the reasons it does not start.

/// Headers a relay does not pass on to Apple or Google: those of a connection rather than of
/// the request, HTTP/2 pseudo-headers (set anew) and HTTP/1's hop-by-hop ones (`content-length`
/// is set for the body sent); and the sender's trace context (`traceparent`, `tracestate`), whose
/// trace ends at the relay: nothing of a trace goes upstream.
func isConnectionHeader(_ name: String) -> Bool {
    if name.hasPrefix(":") { return true }
    switch name.lowercased() {
    case "content-length", "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
        "http2-settings", "traceparent", "tracestate":
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
