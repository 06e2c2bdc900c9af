import Logging
import NIOSSL
import PushMedia
import ServiceLifecycle

/// A relay's listener as a service of `serve`: it stops on graceful shutdown, lets the requests
/// in flight finish within the drain limit, then closes the relay's upstream connections.
struct RelayService<Policy: RelayPolicy>: Service {
    let relay: Relay<Policy>
    let host: String
    let port: Int?
    let tls: NIOSSLContext?
    /// Whether HTTP/1.1 is served beside HTTP/2 (FCM's clients speak both; Apple's only HTTP/2).
    let http1: Bool
    /// How long the requests in flight may take once shutdown began.
    let drainLimit: Duration
    /// The process's executor for housekeeping (giving memory back after a burst).
    let housekeeping: BlockingExecutor
    let onRunning: @Sendable (_ port: Int, _ tls: Bool) async -> Void

    func run() async throws {
        let metrics = relay.policy.media.metrics
        let name = relay.policy.name
        let tls = tls
        try await RelayListener(
            endpoint: relay, host: host, port: port, tls: tls, http1: http1, drainLimit: drainLimit,
            budget: RelayBudget(limits: relay.limits) { metrics.relayShed(relay: name, reason: $0) },
            housekeeping: housekeeping
        ).run { port in await onRunning(port, tls != nil) }
        await relay.shutdown()
    }
}

extension RelayService {
    /// A relay's listener around `policy`, as its settings say: the address, TLS with the relay's
    /// ALPN protocols (HTTP/1.1 served beside HTTP/2 when it offers it), the drain limit. The
    /// one way either relay is made; who may reach it was checked before (`StartChecks`).
    init<Config: RelayListenerConfig>(
        _ config: Config, policy: Policy, limits: RelayLimits, housekeeping: BlockingExecutor,
        onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) {
        try self.init(
            relay: Relay(policy: policy, limits: limits), host: config.host, port: config.port,
            tls: config.serverTLS(), http1: Config.protocols.contains("http/1.1"), drainLimit: config.drainLimit,
            housekeeping: housekeeping, onRunning: onRunning)
    }
}

extension RelayService where Policy == APNsPolicy {
    /// The APNs relay: HTTP/2 only, over TLS (ALPN `h2` offered; a client that sends no ALPN and
    /// starts with the HTTP/2 preface is served the same) or cleartext with prior knowledge (h2c).
    static func apns(
        parts: ServerParts, logger: Logger, onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) -> Self {
        let config = parts.server.apns
        try config.validate()
        let policy = try APNsPolicy(config: config, parts: parts, logger: logger)
        let (upstream, credentials) = (policy.upstream, parts.credentials)
        parts.metrics.apnsConnections.withLock { $0 = { upstream.connectionCount + credentials.connectionCount } }
        return try RelayService(
            config, policy: policy, limits: parts.server.relay, housekeeping: parts.pipeline.resources.housekeeping,
            onRunning: onRunning)
    }
}

extension RelayService where Policy == FCMPolicy {
    /// The FCM relay: HTTP/1.1 and h2c (prior knowledge) on one cleartext port, or with a
    /// certificate TLS with ALPN `h2` and `http/1.1`.
    static func fcm(
        parts: ServerParts, logger: Logger, onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) -> Self {
        let config = parts.server.fcm
        try config.validate()
        return try RelayService(
            config, policy: try FCMPolicy(config: config, parts: parts, logger: logger), limits: parts.server.relay,
            housekeeping: parts.pipeline.resources.housekeeping, onRunning: onRunning)
    }
}
