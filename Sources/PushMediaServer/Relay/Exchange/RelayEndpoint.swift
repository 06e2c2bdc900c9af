import NIOCore
import NIOHPACK
import NIOSSL

/// What a relay answers one request: its own refusal or the upstream's answer. `headers` has no
/// pseudo-headers and no `content-length` (set for the body written).
struct RelayAnswer: Sendable {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer?
}

/// A relay served by a `RelayListener`: it answers complete requests.
protocol RelayEndpoint: Sendable {
    /// The largest request body read; a longer one is answered with `tooLarge` at once.
    var bodyLimit: Int { get }
    /// Answers one request: `done` is called once, on `eventLoop` (at once for a refusal).
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, on eventLoop: any EventLoop,
        done: @escaping @Sendable (RelayAnswer) -> Void)
    /// The same, with the identity of a client that presented a TLS certificate. An endpoint
    /// implements one of the two (`RelayForward.swift` gives each a default calling the other).
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, client: RelayClient?,
        on eventLoop: any EventLoop, done: @escaping @Sendable (RelayAnswer) -> Void)
    /// The answer to a body over `bodyLimit`.
    func tooLarge(headers: HPACKHeaders) -> RelayAnswer
    /// Where requests go.
    var upstream: HTTP2Upstream { get }
}

extension RelayEndpoint {
    /// Serves until graceful shutdown (see `RelayListener`), then closes the upstream connections.
    func serve(
        host: String, port: Int?, tls: NIOSSLContext?, http1: Bool, drainLimit: Duration,
        limits: RelayLimits = RelayLimits(), onShed: @escaping @Sendable (_ reason: String) -> Void = { _ in },
        onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) async throws {
        try await RelayListener(
            endpoint: self, host: host, port: port, tls: tls, http1: http1, drainLimit: drainLimit,
            budget: RelayBudget(limits: limits, onShed: onShed)
        ).run { port in await onRunning(port, tls != nil) }
        try? await upstream.shutdown().get()
    }

    /// Sends `push` on `pool`'s connection of `eventLoop` of the relay's own upstream (see
    /// `forward(_:via:…)`).
    func forward(
        _ push: UpstreamPush, pool: String, outcome: String, on eventLoop: any EventLoop,
        unavailable: @escaping @Sendable (any Error) -> RelayAnswer,
        done: @escaping @Sendable (RelayAnswer, _ upstreamTime: Duration) -> Void
    ) {
        forward(
            push, via: upstream, pool: pool, outcome: outcome, on: eventLoop, unavailable: unavailable, done: done)
    }
}
