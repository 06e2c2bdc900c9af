import NIOCore
import NIOHPACK
import Tracing

/// A push or message on its way upstream (to Apple, Google or a token endpoint): the path, the
/// headers to send (no pseudo-headers) and the body.
struct UpstreamPush: Sendable {
    var path: String
    var headers: HPACKHeaders
    var body: ByteBuffer
}

/// The upstream's answer: status, headers (no pseudo-headers) and body.
struct UpstreamAnswer: Sendable {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer?
}

/// Why a push got no answer from the upstream.
enum UpstreamFailure: Error, CustomStringConvertible {
    /// Connecting or TLS failed.
    case unreachable(String)
    /// No answer within the timeout.
    case timedOut
    /// Refused unprocessed (`GOAWAY` below its stream, or `REFUSED_STREAM`): safe to send again.
    case notProcessed
    /// The stream or connection ended without an answer.
    case reset(String)

    var description: String {
        switch self {
        case let .unreachable(why): "upstream unreachable: \(why)"
        case .timedOut: "no answer from the upstream in time"
        case .notProcessed: "the upstream did not process the push"
        case let .reset(why): "the upstream ended the stream: \(why)"
        }
    }
}

/// Where a push's answer goes: called once, on the event loop of the connection it went out on.
/// A closure rather than a future: two fewer allocations and callback lists per push.
struct UpstreamReply: Sendable {
    let deliver: @Sendable (Result<UpstreamAnswer, any Error>) -> Void
    /// The push's upstream span, when its trace is recorded: its event `dequeued` marks when
    /// the push leaves the fair queue on a stream of its own.
    let span: (any Span)?

    init(span: (any Span)? = nil, _ deliver: @escaping @Sendable (Result<UpstreamAnswer, any Error>) -> Void) {
        self.deliver = deliver
        self.span = span
    }

    /// The push left the fair queue on a stream of its own.
    func opened() {
        span?.addEvent(SpanEvent(name: "dequeued"))
    }

    func succeed(_ answer: UpstreamAnswer) { deliver(.success(answer)) }
    func fail(_ error: any Error) { deliver(.failure(error)) }
}
