import Logging
import NIOCore
import NIOSSL

/// Where a relay sends its pushes: `HTTP2Upstream` (HTTP/2 over TLS to Apple or Google), or an
/// upstream of the tests' that records what it is sent.
protocol RelayUpstream: Sendable {
    /// `host[:port]`, for messages.
    var authority: String { get }
    /// Open connections, for the metrics.
    var connectionCount: Int { get }
    /// Sends `push` on `pool`'s connection of `eventLoop` in its turn under `queue`; `reply` gets
    /// the answer or the failure, once, on `eventLoop`.
    func send(_ push: UpstreamPush, pool: String, queue: QueueKey, on eventLoop: any EventLoop, reply: UpstreamReply)
    /// Closes every connection.
    func shutdown() -> EventLoopFuture<Void>
}

extension HTTP2Upstream: RelayUpstream {
    var authority: String { endpoint.authority }
}

/// Makes the relays' upstreams: every relay, held credential and token endpoint asks it, so one
/// place decides what they talk to.
package struct UpstreamMaker: Sendable {
    /// An upstream for `endpoint`: answers within `timeout`, the connections within `limits`,
    /// `extraCA` trusted too (`caSetting` names its flag in errors), `certificate` presented as
    /// the TLS client certificate (an APNs certificate credential).
    let make:
        @Sendable (
            _ endpoint: UpstreamEndpoint, _ timeout: Duration, _ limits: RelayLimits, _ extraCA: String?,
            _ caSetting: String, _ certificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)?,
            _ logger: Logger
        ) throws(RelaySetupError) -> any RelayUpstream

    /// HTTP/2 over TLS, as shipped.
    package static let http2 = UpstreamMaker {
        endpoint, timeout, limits, extraCA, caSetting, certificate, logger throws(RelaySetupError) in
        try HTTP2Upstream(
            endpoint: endpoint, timeout: timeout, limits: limits, extraCA: extraCA, caSetting: caSetting,
            logger: logger, certificate: certificate)
    }

    func callAsFunction(
        _ endpoint: UpstreamEndpoint, timeout: Duration, limits: RelayLimits, extraCA: String?, caSetting: String,
        certificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)? = nil, logger: Logger
    ) throws(RelaySetupError) -> any RelayUpstream {
        try make(endpoint, timeout, limits, extraCA, caSetting, certificate, logger)
    }
}
