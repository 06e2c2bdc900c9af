import NIOCore
import NIOHPACK

extension RelayEndpoint {
    /// A request without a client identity (a cleartext listener, or a client without a certificate).
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, on eventLoop: any EventLoop,
        done: @escaping @Sendable (RelayAnswer) -> Void
    ) {
        handle(method: method, path: path, headers: headers, body: body, client: nil, on: eventLoop, done: done)
    }

    /// An endpoint that does not look at its clients' certificates.
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, client: RelayClient?,
        on eventLoop: any EventLoop, done: @escaping @Sendable (RelayAnswer) -> Void
    ) {
        handle(method: method, path: path, headers: headers, body: body, on: eventLoop, done: done)
    }

    /// Sends `push` on `pool`'s connection of `eventLoop` of `upstream` (the relay's own, or a held
    /// credential's); `done` gets the upstream's answer (or `unavailable`'s, when it gave none)
    /// with `x-pushmedia-outcome: outcome` added, and the time the upstream took.
    func forward(
        _ push: UpstreamPush, via upstream: HTTP2Upstream, pool: String, outcome: String, on eventLoop: any EventLoop,
        unavailable: @escaping @Sendable (any Error) -> RelayAnswer,
        done: @escaping @Sendable (RelayAnswer, _ upstreamTime: Duration) -> Void
    ) {
        let sent = ContinuousClock.now
        upstream.send(
            push, team: pool, on: eventLoop,
            reply: UpstreamReply { result in
                var answer: RelayAnswer
                switch result {
                case let .success(upstream):
                    answer = RelayAnswer(status: upstream.status, headers: upstream.headers, body: upstream.body)
                case let .failure(error):
                    answer = unavailable(error)
                }
                answer.headers.add(name: "x-pushmedia-outcome", value: outcome)
                done(answer, ContinuousClock.now - sent)
            })
    }
}
