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
