import NIOCore
import NIOHPACK

/// One request to a relay, as either HTTP version delivers it: what the client sent, who it is,
/// the connection it came on and when it arrived. The transport builds it; `Relay` handles it.
struct RelayExchange: Sendable {
    var method: String
    var path: String
    /// Lower-case names, no pseudo-headers; those the client sent never-indexed keep that mark.
    var headers: HPACKHeaders
    var body: ByteBuffer
    /// The client's TLS certificate identity, when it presented one.
    var client: RelayClient?
    /// The client connection it came on: requests queue per connection toward the upstream.
    var connection: ObjectIdentifier
    var arrival: ContinuousClock.Instant
    /// The connection's event loop: the answer is delivered there.
    var eventLoop: any EventLoop
}

/// What a relay answers one request: its own refusal or the upstream's answer. `headers` has no
/// pseudo-headers and no `content-length` (set for the body written). An `Error`: a refusal ends
/// the request's path where it is given (`Result<Route, RelayAnswer>`).
struct RelayAnswer: Sendable, Error {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer?
    /// `x-pushmedia-outcome`, written after `headers` (the pipeline's `status[/reason]`, or
    /// `skipped/<why>`); nil for an answer the relay did not forward.
    var outcome: String?

    init(status: Int, headers: HPACKHeaders, body: ByteBuffer?, outcome: String? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.outcome = outcome
    }

    /// Its header fields as written: `headers`, then `x-pushmedia-outcome`.
    func forEachField(_ body: (String, String, HPACKIndexing) -> Void) {
        for (name, value, indexing) in headers { body(name, value, indexing) }
        if let outcome { body("x-pushmedia-outcome", outcome, .indexable) }
    }
}

/// What the transport hands requests to: a relay that answers each once, on its event loop.
protocol RelayEndpoint: Sendable {
    /// The bounds the relay's listener keeps.
    var limits: RelayLimits { get }
    /// Answers one request: `done` is called once, on `exchange.eventLoop` (at once for a refusal).
    func handle(_ exchange: RelayExchange, done: @escaping @Sendable (RelayAnswer) -> Void)
    /// The answer to a request refused by the transport (`RelayRefusal`), in the relay's shape.
    func refused(_ refusal: RelayRefusal, headers: HPACKHeaders) -> RelayAnswer
    /// Closes what the relay holds open upstream (after its listener stopped).
    func shutdown() async
}

/// Why the transport answers a request itself, before the relay sees it.
enum RelayRefusal: Sendable {
    /// The body passed `RelayLimits.maxBody`.
    case bodyTooLarge
    /// The header fields passed `RelayLimits.maxHeaderList`.
    case headersTooLarge
    /// An HTTP/1.1 request past the relay's bounds (HTTP/2 refuses the stream instead).
    case overloaded
}
