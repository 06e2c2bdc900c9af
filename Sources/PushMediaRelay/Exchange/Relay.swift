import Logging
import NIOCore
import NIOHPACK
import NIOSSL
import PushMedia
import ServiceLifecycle
import Tracing

/// How a request is signed for its route: at once, refused, or once a token is at hand.
enum RelaySigning {
    case signed(HPACKHeaders)
    case refused(RelayAnswer)
    case later(EventLoopFuture<Result<HPACKHeaders, RelayAnswer>>)
}

/// A relay: one path for every request, whichever its policy (Apple's or Google's) and its HTTP
/// version. The transport admitted it within the listener's bounds; here it is routed (the
/// policy's checks and credentials), its media prepared, signed, sent upstream in its app's fair
/// share (`FairQueue`), answered with `x-pushmedia-outcome`, and logged.
final class Relay<Policy: RelayPolicy>: RelayEndpoint {
    let policy: Policy
    let limits: RelayLimits
    /// Which pushes start their span (`RelayTrace`); nil without traces.
    let sampler: TraceSampler?
    private let spanNames: RelayTrace.Names

    init(policy: Policy, limits: RelayLimits, sampler: TraceSampler? = nil) {
        self.policy = policy
        self.limits = limits
        self.sampler = sampler
        spanNames = RelayTrace.Names(relay: policy.name)
    }

    func handle(_ exchange: RelayExchange, done: @escaping @Sendable (RelayAnswer) -> Void) {
        let span = sampler.flatMap { RelayTrace.push(exchange, names: spanNames, sampler: $0) }
        let route: Policy.Route
        switch policy.route(exchange) {
        case let .success(routed):
            route = routed
        case let .failure(refusal):
            policy.finished(
                exchange, route: nil, answer: refusal,
                handled: .refused(since: exchange.arrival, trace: PipelineTrace.logIDs(of: span)))
            if let span { RelayTrace.finished(span, refusal, handling: .refused) }
            return done(refusal)
        }
        if let span {
            RelayTrace.routed(span, exchange, app: route.app, priority: policy.priority(exchange, route: route))
        }
        // The media's spans (the pipeline's, when it runs) under the push's.
        switch policy.prepare(exchange, route: route, span: span) {
        case let .ready(prepared):
            sign(exchange, route, prepared, span, done)
        case let .later(prepared):
            prepared.whenSuccess { self.sign(exchange, route, $0, span, done) }
        }
    }

    func refused(_ refusal: RelayRefusal, headers: HPACKHeaders) -> RelayAnswer {
        policy.refused(refusal, headers: headers)
    }

    func shutdown() async { await policy.shutdown() }

    private func sign(
        _ exchange: RelayExchange, _ route: Policy.Route, _ prepared: RelayPrepared, _ span: (any Span)?,
        _ done: @escaping @Sendable (RelayAnswer) -> Void
    ) {
        switch policy.authorize(exchange, route: route) {
        case let .signed(headers):
            send(exchange, route, prepared, headers, span, done)
        case let .refused(refusal):
            answer(refusal, exchange, route, prepared, upstream: .zero, span, done)
        case let .later(signing):
            signing.whenSuccess { signed in
                switch signed {
                case let .success(headers): self.send(exchange, route, prepared, headers, span, done)
                case let .failure(refusal): self.answer(refusal, exchange, route, prepared, upstream: .zero, span, done)
                }
            }
        }
    }

    private func send(
        _ exchange: RelayExchange, _ route: Policy.Route, _ prepared: RelayPrepared, _ headers: HPACKHeaders,
        _ span: (any Span)?, _ done: @escaping @Sendable (RelayAnswer) -> Void
    ) {
        let sent = ContinuousClock.now
        let upstreamSpan = span.flatMap { RelayTrace.upstream(under: $0, names: spanNames) }
        let queue = QueueKey(
            app: route.app, connection: exchange.connection, priority: policy.priority(exchange, route: route))
        route.upstream.send(
            UpstreamPush(path: exchange.path, headers: headers, body: prepared.body), pool: route.pool, queue: queue,
            on: exchange.eventLoop,
            reply: UpstreamReply(span: upstreamSpan) { result in
                if let upstreamSpan { RelayTrace.answered(upstreamSpan, result) }
                let answer: RelayAnswer
                switch result {
                case let .success(upstream):
                    answer = RelayAnswer(status: upstream.status, headers: upstream.headers, body: upstream.body)
                case let .failure(error):
                    answer = self.policy.unavailable(error, exchange: exchange, route: route)
                }
                self.answer(answer, exchange, route, prepared, upstream: .now - sent, span, done)
            })
    }

    /// Answers with `answer` and what was done (`x-pushmedia-outcome`), and logs it.
    private func answer(
        _ answer: RelayAnswer, _ exchange: RelayExchange, _ route: Policy.Route, _ prepared: RelayPrepared,
        upstream: Duration, _ span: (any Span)?, _ done: @escaping @Sendable (RelayAnswer) -> Void
    ) {
        var answer = answer
        answer.outcome = prepared.label
        // The push's line carries its trace_id and span_id.
        let handled = RelayHandled(
            outcome: prepared.label, handling: prepared.handling, total: .now - exchange.arrival, upstream: upstream,
            trace: PipelineTrace.logIDs(of: span))
        policy.finished(exchange, route: route, answer: answer, handled: handled)
        if let span { RelayTrace.finished(span, answer, handling: prepared.handling) }
        done(answer)
    }
}
