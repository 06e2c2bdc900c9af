import Logging
import PushMedia
import ServiceLifecycle

/// A relay's listener as a service of `serve`: it stops on graceful shutdown, lets the requests
/// in flight finish within the drain limit, then closes the relay's upstream connections.
struct RelayService<Policy: RelayPolicy>: RelayServing {
    let relay: Relay<Policy>
    let listener: RelayListener<Relay<Policy>>
    let config: Policy.Config
    let logger: Logger
    let onRunning: @Sendable (_ port: Int, _ tls: Bool) async -> Void

    func run() async throws {
        let tls = listener.tls != nil
        try await listener.run { port in
            // Its address, TLS, upstream, and what the policy adds (how the APNs relay signs).
            let metadata: Logger.Metadata = [
                "address": "\(config.listener.host):\(port)", "tls": "\(tls)",
                "upstream": "\(config.upstreamEndpoint.authority)",
            ]
            logger.info(
                "\(relay.policy.name) relay listening", metadata: metadata.merging(relay.policy.listening) { $1 })
            await onRunning(port, tls)
        }
        await relay.shutdown()
    }
}

extension RelayService {
    /// The relay `config` describes, its policy on the server's `parts`: the settings that go
    /// together checked, TLS with the relay's ALPN protocols (HTTP/1.1 served beside HTTP/2 when
    /// it offers it), the drain limit. The one way either relay is made; who may reach it was
    /// checked before (the server's start checks).
    init(
        _ config: Policy.Config, parts: RelayParts, logger: Logger,
        onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) {
        try config.validate()
        let policy = try Policy(config: config, parts: parts, logger: logger)
        let (metrics, name) = (parts.metrics, policy.name)
        let relay = Relay(policy: policy, limits: parts.limits, sampler: parts.sampler)
        self.relay = relay
        listener = RelayListener(
            endpoint: relay, host: config.listener.host, port: config.listener.port, tls: try config.serverTLS(),
            http1: Policy.Config.protocols.contains("http/1.1"), drainLimit: config.drainLimit,
            budget: RelayBudget(limits: parts.limits) { metrics.relayShed(relay: name, reason: $0) },
            housekeeping: parts.pipeline.resources.housekeeping)
        self.config = config
        self.logger = logger
        self.onRunning = onRunning
    }

    /// Open connections upstream: the relay's own, and its held credentials'.
    var upstreamConnections: Int { relay.policy.upstreamConnections }
}

/// A relay as a service of `serve`.
package protocol RelayServing: Service {
    /// Open connections to the relay's own upstream.
    var upstreamConnections: Int { get }
}

/// Which relay.
package enum RelayName: String, Sendable, CaseIterable {
    case apns, fcm

    /// In messages: `APNs`, `FCM`.
    package var title: String {
        switch self {
        case .apns: APNsRelayConfig.title
        case .fcm: FCMRelayConfig.title
        }
    }
}

extension RelaysConfig {
    /// The relay `name`, as these settings say, on the server's `parts`: the one way either
    /// relay is made (`RelayService.init`); `onRunning` gets its port and whether it speaks TLS.
    package func service(
        _ name: RelayName, parts: RelayParts, logger: Logger,
        onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) -> any RelayServing {
        switch name {
        case .apns: try RelayService<APNsPolicy>(apns, parts: parts, logger: logger, onRunning: onRunning)
        case .fcm: try RelayService<FCMPolicy>(fcm, parts: parts, logger: logger, onRunning: onRunning)
        }
    }

    /// The listener's settings of relay `name`.
    package func listener(_ name: RelayName) -> RelayListenerSettings {
        switch name {
        case .apns: apns.listener
        case .fcm: fcm.listener
        }
    }

    /// Reads each running relay's TLS certificate and key, as its listener will.
    package func checkTLS() throws(RelaySetupError) {
        if apns.port != nil { _ = try apns.serverTLS() }
        if fcm.port != nil { _ = try fcm.serverTLS() }
    }
}
