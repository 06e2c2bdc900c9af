import Foundation
import Logging
import NIOSSL
import Prometheus
import PushMedia

/// The upstream connections of one APNs credential: a certificate's connections carry its app's
/// pushes only, a key's connections its team's tokens only (Apple's rules). Counted while pushes
/// use it; once replaced by a reload it closes when the last of them is answered.
final class APNsPool: Sendable {
    let credential: APNsCredential
    let upstream: any RelayUpstream
    /// Signs provider tokens for a key entry (one token for 40 minutes).
    let signer: ProviderTokenSigner?
    /// Pushes sent with it, by answer status class.
    private let pushes: Prometheus.Counter
    private let users = Locked((count: 0, retired: false))
    private let lastExpiryLog = Locked<ContinuousClock.Instant?>(nil)

    init(
        _ credential: APNsCredential, config: APNsRelayConfig, limits: RelayLimits, metrics: any RelayMetrics,
        logger: Logger, upstreams: UpstreamMaker
    ) throws(RelaySetupError) {
        self.credential = credential
        var certificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)?
        switch credential.auth {
        case let .token(teamID, keyID, key):
            signer = ProviderTokenSigner(key: key, keyID: keyID, teamID: teamID)
        case let .certificate(chain, key, _):
            signer = nil
            certificate = (chain, key)
        }
        upstream = try upstreams(
            config.upstreamEndpoint(environment: credential.environment), timeout: config.upstreamTimeout,
            limits: limits, extraCA: config.upstreamCA, caSetting: "--apns-upstream-ca", certificate: certificate,
            logger: logger)
        pushes = metrics.counter(.pushes, [("relay", "apns"), ("name", credential.name)])
    }

    /// Takes a use; false once retired.
    func acquire() -> Bool {
        users.withLock { users in
            guard !users.retired else { return false }
            users.count += 1
            return true
        }
    }

    /// Gives a use back (`counted`: a push went out with it): the last one of a retired pool
    /// closes its connections.
    func release(counted: Bool = true) {
        if counted { pushes.increment() }
        let close = users.withLock { users in
            users.count -= 1
            return users.retired && users.count == 0
        }
        if close { _ = upstream.shutdown() }
    }

    /// No new pushes; closes once those it carries are answered.
    func retire() {
        let close = users.withLock { users in
            users.retired = true
            return users.count == 0
        }
        if close { _ = upstream.shutdown() }
    }

    /// Whether its certificate has expired (a key never does).
    func expired(now: Date = Date()) -> Bool {
        guard let identity = credential.certificate else { return false }
        return now >= identity.notValidAfter
    }

    /// Whether to log that it refused an expired certificate's push: once a minute at most.
    func shouldLogExpiry() -> Bool {
        lastExpiryLog.withLock { last in
            let now = ContinuousClock.now
            if let last, now - last < .seconds(60) { return false }
            last = now
            return true
        }
    }
}

extension APNsRelayConfig {
    /// The upstream for a credential's environment: Apple's host for it when `--apns-upstream`
    /// names one of Apple's, the given URL otherwise.
    func upstreamEndpoint(environment: String?) -> UpstreamEndpoint {
        guard let environment, ["production", "development"].contains(upstream) else { return upstreamEndpoint }
        var named = self
        named.upstream = environment
        return named.upstreamEndpoint
    }
}
