import Foundation
import Logging
import NIOCore
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
        _ credential: APNsCredential, config: APNsRelayConfig, limits: RelayLimits, metrics: ServerMetrics,
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

/// The identity of a relay client that presented a TLS certificate.
struct RelayClient: Sendable {
    /// The certificate's subject (`CN=…,O=…`) and common name.
    var subject: String
    var commonName: String?
    /// The topics of an Apple push certificate (empty for any other certificate).
    var appleTopics: Set<String>

    /// The client of a TLS connection, when it presented a certificate.
    static func of(_ context: ChannelHandlerContext) -> RelayClient? {
        guard let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self),
            let certificate = handler.peerCertificate, let der = try? certificate.toDERBytes(),
            let identity = try? CertificateIdentity(der: der)
        else { return nil }
        return RelayClient(subject: identity.subject, commonName: identity.commonName, appleTopics: identity.topics)
    }

    /// Whether an entry's `clients` list lets this client use it (an empty list lets anyone).
    static func allowed(_ client: RelayClient?, by clients: [String]) -> Bool {
        guard !clients.isEmpty else { return true }
        guard let client else { return false }
        return clients.contains(client.subject) || client.commonName.map(clients.contains) == true
    }
}

/// The credentials the relays hold: the set in force, a pool of upstream connections per APNs
/// credential and an access-token cache per service account. `reload` (SIGHUP) reads the file
/// again: new pushes use the new set, pushes in flight finish on their connections, and the
/// pools of removed or changed entries close once idle; a file that does not load keeps the old
/// set and says why (log line, `pushmedia_relay_credentials_reload_failed`).
public final class RelayCredentials: Reloadable {
    public var reloadName: String { "relay credentials" }
    let path: String?
    let passThrough: Bool
    private let apnsConfig: APNsRelayConfig
    private let fcmConfig: FCMRelayConfig
    /// The upstream connections' settings, and what makes them.
    private let limits: RelayLimits
    private let upstreams: UpstreamMaker
    /// `--apns-key` as a catch-all entry.
    private let shorthand: APNsCredential?
    private let environment: [String: String]
    private let metrics: ServerMetrics
    private let logger: Logger

    private struct State {
        var set = CredentialSet()
        var pools: [String: APNsPool] = [:]
        var tokens: [String: ServiceAccountToken] = [:]
    }
    private let state = Locked(State())

    /// Loads the file (when given) and the `--apns-key` shorthand. Blocking.
    public convenience init(
        server: ServerConfig, metrics: ServerMetrics, logger: Logger,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        try self.init(server: server, metrics: metrics, logger: logger, environment: environment, upstreams: .http2)
    }

    /// The same, with the upstreams `upstreams` makes.
    init(
        server: ServerConfig, metrics: ServerMetrics, logger: Logger, environment: [String: String],
        upstreams: UpstreamMaker
    ) throws {
        self.upstreams = upstreams
        path = server.credentials.path
        passThrough = server.credentials.passesThrough
        apnsConfig = server.apns
        fcmConfig = server.fcm
        limits = server.relay
        self.environment = environment
        self.metrics = metrics
        self.logger = logger
        if let key = server.apns.key, let keyID = server.apns.keyID, let teamID = server.apns.teamID {
            let raw: Data
            switch CredentialFiles.providerKey(key) {
            case let .failure(problem):
                throw RelaySetupError.unreadable(what: "--apns-key", path: key, why: problem.text)
            case let .success(read): raw = read
            }
            shorthand = APNsCredential(
                name: "apns-key", auth: .token(teamID: teamID, keyID: keyID, key: raw), topics: [], environment: nil,
                clients: [], fingerprint: Array(raw) + Array(keyID.utf8) + Array(teamID.utf8))
        } else {
            shorthand = nil
        }
        let set = try Self.read(path: path, shorthand: shorthand, environment: environment)
        try install(set)
        if !set.isEmpty {
            logger.info(
                "relay credentials loaded",
                metadata: [
                    "file": "\(path ?? "-")", "apns": "\(set.apns.map(\.name).joined(separator: ","))",
                    "fcm": "\(set.fcm.map(\.name).joined(separator: ","))",
                    "pass_through": "\(passThrough)",
                ])
        }
    }

    /// The file's entries plus the shorthand's.
    private static func read(path: String?, shorthand: APNsCredential?, environment: [String: String])
        throws(CredentialsError) -> CredentialSet
    {
        var set =
            try path.map { path throws(CredentialsError) in try CredentialsFile.load(path, environment: environment) }
            ?? CredentialSet()
        if let shorthand { set = try CredentialSet(apns: set.apns + [shorthand], fcm: set.fcm) }
        return set
    }

    /// Makes `set` the one in force, keeping the pools and token caches of unchanged entries.
    private func install(_ set: CredentialSet) throws(RelaySetupError) {
        let (old, current) = state.withLock { state in (state.pools, state.tokens) }
        var pools: [String: APNsPool] = [:]
        for credential in set.apns {
            if let pool = old[credential.name], pool.credential.fingerprint == credential.fingerprint {
                pools[credential.name] = pool
            } else {
                pools[credential.name] = try APNsPool(
                    credential, config: apnsConfig, limits: limits, metrics: metrics, logger: logger,
                    upstreams: upstreams)
            }
        }
        var tokens: [String: ServiceAccountToken] = [:]
        for credential in set.fcm {
            if let token = current[credential.name], token.credential.fingerprint == credential.fingerprint {
                tokens[credential.name] = token
            } else {
                tokens[credential.name] = try ServiceAccountToken(
                    credential: credential, timeout: fcmConfig.upstreamTimeout, limits: limits,
                    extraCA: fcmConfig.upstreamCA, logger: logger, upstreams: upstreams)
            }
        }
        state.withLock { state in
            state.set = set
            state.pools = pools
            state.tokens = tokens
        }
        for (name, pool) in old where pools[name] !== pool { pool.retire() }
        for (name, token) in current where tokens[name] !== token { _ = token.shutdown() }
        updateGauges(set)
    }

    /// Reads the file again (blocking: `ReloadService` runs it off the cooperative pool); on
    /// failure the set in force stays.
    public func reload() throws {
        let loaded = Result { () throws(CredentialsError) in
            try Self.read(path: path, shorthand: shorthand, environment: environment)
        }
        let failed = metrics.gauge(.reloadFailed)
        switch loaded {
        case let .failure(error):
            failed.set(1.0)
            metrics.counter(.reloads, [("result", "failed")]).increment()
            logger.error(
                "relay credentials not reloaded: the old set stays",
                metadata: ["file": "\(path ?? "")", "why": "\(error)"])
            throw error
        case let .success(set):
            try install(set)
            failed.set(0.0)
            metrics.counter(.reloads, [("result", "ok")]).increment()
            logger.notice(
                "relay credentials reloaded",
                metadata: [
                    "file": "\(path ?? "")", "apns": "\(set.apns.map(\.name).joined(separator: ","))",
                    "fcm": "\(set.fcm.map(\.name).joined(separator: ","))",
                ])
        }
    }

    public func refresh() { updateGauges(state.withLock { $0.set }) }

    /// Days left of each certificate entry, as a gauge; a warning for those within 30 days.
    private func updateGauges(_ set: CredentialSet) {
        for credential in set.apns {
            guard let identity = credential.certificate else { continue }
            let days = identity.daysLeft()
            metrics.gauge(.daysLeft, [("relay", "apns"), ("name", credential.name)]).set(Double(days))
            if days < 30 {
                logger.warning(
                    days < 0 ? "apns certificate expired: its pushes are refused" : "apns certificate expires soon",
                    metadata: [
                        "credential": "\(credential.name)", "days_left": "\(days)",
                        "not_after": "\(identity.notValidAfter)",
                    ])
            }
        }
    }

    // MARK: what the relays ask

    var holdsAPNs: Bool { state.withLock { !$0.set.apns.isEmpty } }
    var holdsFCM: Bool { state.withLock { !$0.set.fcm.isEmpty } }

    /// The pool for `topic`, with a use taken (give it back with `release`).
    func apnsPool(forTopic topic: String) -> APNsPool? {
        state.withLock { state in
            guard let credential = state.set.apns(forTopic: topic), let pool = state.pools[credential.name],
                pool.acquire()
            else { return nil }
            return pool
        }
    }

    /// The token cache of `project`'s service account.
    func fcmToken(forProject project: String) -> ServiceAccountToken? {
        state.withLock { state in state.set.fcm(forProject: project).flatMap { state.tokens[$0.name] } }
    }

    /// Certificate entries and their expiry, for `/readyz`.
    var certificates: [(name: String, daysLeft: Int, notAfter: Date)] {
        state.withLock { $0.set.apns }.compactMap { credential in
            credential.certificate.map { (credential.name, $0.daysLeft(), $0.notValidAfter) }
        }
    }

    /// `/readyz`'s `certificates`: each certificate entry's `days_left`, `not_after` and `status`
    /// (`ok`, `expires_soon` within 30 days, `expired`: its pushes are refused); nil without any.
    var readiness: JSONValue? {
        let certificates = self.certificates
        guard !certificates.isEmpty else { return nil }
        let format = ISO8601DateFormatter()
        return .object(
            JSONObject(
                certificates.map { certificate in
                    let status =
                        certificate.daysLeft < 0 ? "expired" : certificate.daysLeft < 30 ? "expires_soon" : "ok"
                    return (
                        certificate.name,
                        .object(
                            JSONObject([
                                ("status", .string(status)), ("days_left", .number(String(certificate.daysLeft))),
                                ("not_after", .string(format.string(from: certificate.notAfter))),
                            ]))
                    )
                }))
    }

    /// Open upstream connections of the held credentials.
    var connectionCount: Int {
        state.withLock { Array($0.pools.values) }.reduce(0) { $0 + $1.upstream.connectionCount }
    }

    /// Closes every connection.
    func shutdown() async {
        let (pools, tokens) = state.withLock { ($0.pools.values, $0.tokens.values) }
        for pool in pools { try? await pool.upstream.shutdown().get() }
        for token in tokens { try? await token.shutdown().get() }
    }
}

extension ServerMetrics {
    /// The held credentials' metrics, straight in the Prometheus registry (made once per name and labels).
    enum CredentialMetric {
        case pushes, daysLeft, reloads, reloadFailed

        var descriptor: MetricNameDescriptor {
            switch self {
            case .pushes:
                MetricNameDescriptor(
                    metricName: "pushmedia_relay_credential_pushes", unitName: "total",
                    helpText: "Pushes and messages sent with a held credential, by relay and entry name")
            case .daysLeft:
                MetricNameDescriptor(
                    metricName: "pushmedia_relay_certificate_days_left", unitName: "",
                    helpText: "Whole days until a held APNs certificate expires (negative: expired)")
            case .reloads:
                MetricNameDescriptor(
                    metricName: "pushmedia_relay_credentials_reloads", unitName: "total",
                    helpText: "Reloads of the credentials file on SIGHUP, by result")
            case .reloadFailed:
                MetricNameDescriptor(
                    metricName: "pushmedia_relay_credentials_reload_failed", unitName: "",
                    helpText: "1 while the last reload of the credentials file failed (the old set is in force)")
            }
        }
    }

    func counter(_ metric: CredentialMetric, _ labels: [(String, String)]) -> Prometheus.Counter {
        registry.makeCounter(descriptor: metric.descriptor, labels: labels)
    }

    func gauge(_ metric: CredentialMetric, _ labels: [(String, String)] = []) -> Prometheus.Gauge {
        labels.isEmpty
            ? registry.makeGauge(descriptor: metric.descriptor)
            : registry.makeGauge(descriptor: metric.descriptor, labels: labels)
    }
}
