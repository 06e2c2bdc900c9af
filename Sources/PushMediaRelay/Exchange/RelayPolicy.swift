import Logging
import NIOCore
import NIOHPACK
import PushMedia
import Tracing

/// Where a valid request goes: the upstream and its connection pool, the app it queues as, and
/// the credential that signs it (if the relay holds one).
protocol RelayRoute: Sendable {
    var upstream: any RelayUpstream { get }
    /// The upstream connections it may share: one team's (APNs accepts one team's tokens per
    /// connection), or one credential's.
    var pool: String { get }
    /// The app its requests queue as toward the upstream (`FairQueue`): a credential entry, or the
    /// topic or project of a pass-through request.
    var app: String { get }
    /// The held credential's name, for the line and the metrics.
    var credential: String? { get }
}

/// What makes a relay Apple's or Google's: which requests are valid, where each goes, how its
/// media is prepared, how it is signed, the shape of its refusals and its log line. `Relay`
/// runs the steps common to both.
protocol RelayPolicy: Sendable {
    associatedtype Route: RelayRoute
    associatedtype Config: RelayListenerConfig

    /// The policy of a relay with these settings, on the server's parts.
    init(config: Config, parts: RelayParts, logger: Logger) throws(RelaySetupError)
    /// `apns` or `fcm`: the relay's name in metrics and logs.
    var name: String { get }
    /// What a request's media goes through (the pipeline, the memo), and the metrics.
    var media: RelayMedia { get }
    /// The relay's own upstream (pass-through pushes, and every FCM message).
    var upstream: any RelayUpstream { get }

    /// The request's route, or the upstream's own refusal of it (Apple's or Google's checks,
    /// the credential rules).
    func route(_ exchange: RelayExchange) -> Result<Route, RelayAnswer>
    /// `apns-priority` 10 (0), 5 (1) or 1 (2): the class the request queues in within its app.
    func priority(_ exchange: RelayExchange, route: Route) -> Int
    /// The body to forward: the media prepared (from the memo or through the pipeline, whose
    /// spans go under `span`), or as it came.
    func prepare(_ exchange: RelayExchange, route: Route, span: (any Span)?) -> RelayPreparation
    /// The headers sent upstream, signed for the route: now, or once a token is at hand (on
    /// `exchange.eventLoop`), or the refusal when no signature could be had.
    func authorize(_ exchange: RelayExchange, route: Route) -> RelaySigning
    /// The answer when the upstream gave none.
    func unavailable(_ error: any Error, exchange: RelayExchange, route: Route) -> RelayAnswer
    /// The answer to a request the transport refused.
    func refused(_ refusal: RelayRefusal, headers: HPACKHeaders) -> RelayAnswer
    /// The request is answered: metrics and its line (`route` nil: refused before routing).
    func finished(_ exchange: RelayExchange, route: Route?, answer: RelayAnswer, handled: RelayHandled)
    /// Closes what the policy holds open upstream.
    func shutdown() async
    /// Open connections upstream: the relay's own, and those of credentials it holds.
    var upstreamConnections: Int { get }
    /// What the relay's "listening" line says of it beside its address, TLS and upstream.
    var listening: Logger.Metadata { get }
}

extension RelayPolicy {
    var upstreamConnections: Int { upstream.connectionCount }
    var listening: Logger.Metadata { [:] }
}

/// How a relay handled a request's body.
package enum RelayHandling: String, Sendable {
    /// The pipeline ran.
    case processed
    /// A kept rewrite answered.
    case memo
    /// Forwarded untouched.
    case passthrough
    /// Refused before it went upstream.
    case refused

    /// A small number of its own (metrics' keys).
    package var index: Int {
        switch self {
        case .processed: 0
        case .memo: 1
        case .passthrough: 2
        case .refused: 3
        }
    }
}

/// What was done for one request, for its line and the metrics.
struct RelayHandled: Sendable {
    /// `x-pushmedia-outcome`: the pipeline's `status[/reason]`, `skipped/<why>`; empty when refused.
    var outcome: String
    var handling: RelayHandling
    /// From arrival to answer, and of that the upstream's share.
    var total: Duration
    var upstream: Duration
    /// The ids of the request's span, for its line (nil when its trace is not recorded).
    var trace: TraceParent?

    static func refused(since arrival: ContinuousClock.Instant, trace: TraceParent?) -> RelayHandled {
        RelayHandled(outcome: "", handling: .refused, total: .now - arrival, upstream: .zero, trace: trace)
    }
}
