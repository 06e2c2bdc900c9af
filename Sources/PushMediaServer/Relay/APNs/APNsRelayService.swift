import Foundation
import Logging
import NIOCore
import NIOSSL
import PushMedia
import ServiceLifecycle

/// The relay's listener: HTTP/2 only, over TLS (ALPN `h2` offered; a client that sends no ALPN
/// and starts with the HTTP/2 preface is served the same) or cleartext with prior knowledge (h2c).
/// On graceful shutdown it stops accepting, lets the pushes in flight finish, sends `GOAWAY` to
/// every client and closes.
public struct APNsRelayService: Service {
    let relay: APNsRelay
    let tls: NIOSSLContext?
    let limits: RelayLimits
    let onRunning: @Sendable (_ port: Int, _ tls: Bool) async -> Void

    /// Checks the settings, reads the certificates and keys, and prepares the upstream.
    public init(
        parts: ServerParts, logger: Logger, onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) {
        let config = parts.server.apns
        try config.validate()
        // Held credentials make the relay a signing service: loopback or client certificates only.
        let holds = parts.credentials.holdsAPNs
        if !config.loopback && config.clientCA == nil
            && (holds || (parts.credentials.passThrough && config.allowedTeams.isEmpty))
        {
            guard parts.server.insecureNoAuth else { throw .unrestricted(host: config.host, ownKey: holds) }
            logger.warning(
                "the APNs relay takes pushes from anyone (--insecure-no-auth)",
                metadata: ["address": "\(config.host)", "signs": "\(holds)"])
        }
        tls = try serverTLS(
            certificate: config.tlsCertificate, key: config.tlsKey, clientCA: config.clientCA, protocols: ["h2"],
            what: "--apns-tls-cert/--apns-tls-key")
        let upstream = try HTTP2Upstream(
            endpoint: config.upstreamEndpoint, timeout: config.upstreamTimeout, extraCA: config.upstreamCA,
            caSetting: "--apns-upstream-ca", logger: logger)
        relay = APNsRelay(config: config, parts: parts, upstream: upstream, logger: logger)
        let credentials = parts.credentials
        parts.metrics.apnsConnections.withLock { $0 = { upstream.connectionCount + credentials.connectionCount } }
        limits = parts.server.relay
        self.onRunning = onRunning
    }

    public func run() async throws {
        let config = relay.config
        try await relay.serve(
            host: config.host, port: config.port, tls: tls, http1: false,
            drainLimit: config.budget + config.upstreamTimeout + .seconds(1), limits: limits,
            onShed: { [metrics = relay.metrics] in metrics.relayShed(relay: "apns", reason: $0) }, onRunning: onRunning)
        await relay.credentials.shutdown()
    }
}
