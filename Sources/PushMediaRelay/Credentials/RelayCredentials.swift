import Foundation
import Logging
import NIOCore
import NIOSSL
import Prometheus
import PushMedia

/// The credentials the relays hold: the set in force, a pool of upstream connections per APNs
/// credential and an access-token cache per service account. `reload` (SIGHUP) reads the file
/// again: new pushes use the new set, pushes in flight finish on their connections, and the
/// pools of removed or changed entries close once idle; a file that does not load keeps the old
/// set and says why (log line, `pushmedia_relay_credentials_reload_failed`).
public final class RelayCredentials: Sendable {
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
    /// Who may reach the relays with a set held (the server's exposure rule, as at start): a
    /// reload whose set breaks it is refused as one that does not read.
    private let exposure: @Sendable (HeldCredentials) throws -> Void
    private let metrics: any RelayMetrics
    private let logger: Logger

    private struct State {
        var set = CredentialSet()
        var pools: [String: APNsPool] = [:]
        var tokens: [String: ServiceAccountToken] = [:]
    }
    private let state = Locked(State())

    /// Loads the file (when given) and the `--apns-key` shorthand of `config`, blocking; its
    /// upstreams are made by `upstreams`, and a reload must keep to `exposure`.
    package init(
        config: RelaysConfig, metrics: any RelayMetrics, logger: Logger, environment: [String: String],
        upstreams: UpstreamMaker, exposure: @escaping @Sendable (HeldCredentials) throws -> Void
    ) throws {
        self.upstreams = upstreams
        path = config.credentials.path
        passThrough = config.credentials.passesThrough
        apnsConfig = config.apns
        fcmConfig = config.fcm
        limits = config.limits
        self.environment = environment
        self.metrics = metrics
        self.logger = logger
        self.exposure = exposure
        shorthand = try Self.apnsKeyEntry(config.apns)
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

    /// What `config` holds: the file's entries plus `--apns-key`'s, read and checked as the
    /// relays read them (the server's start checks ask it).
    package static func held(config: RelaysConfig, environment: [String: String]) throws -> HeldCredentials {
        HeldCredentials(
            try read(path: config.credentials.path, shorthand: apnsKeyEntry(config.apns), environment: environment))
    }

    /// `--apns-key` with its ID and team as a catch-all entry; nil without it.
    private static func apnsKeyEntry(_ config: APNsRelayConfig) throws(RelaySetupError) -> APNsCredential? {
        guard let key = config.key, let keyID = config.keyID, let teamID = config.teamID else { return nil }
        let raw: Data
        switch CredentialFiles.providerKey(key) {
        case let .failure(problem): throw .unreadable(what: "--apns-key", path: key, why: problem.text)
        case let .success(read): raw = read
        }
        return APNsCredential(
            name: "apns-key", auth: .token(teamID: teamID, keyID: keyID, key: raw), topics: [], environment: nil,
            clients: [], fingerprint: Array(raw) + Array(keyID.utf8) + Array(teamID.utf8))
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
    /// failure, or when the new set would let anyone reach a relay that now signs (the rule
    /// checked at start), the set in force stays.
    public func reload() throws {
        let loaded = Result { () throws -> CredentialSet in
            let set = try Self.read(path: path, shorthand: shorthand, environment: environment)
            try exposure(HeldCredentials(set))
            return set
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

    /// Whole days before a certificate's end from which it "expires soon": a warning at start
    /// and reload, and `/readyz`'s `expires_soon`.
    static let expiresSoonDays = 30

    /// Days left of each certificate entry, as a gauge; a warning for those that expire soon.
    private func updateGauges(_ set: CredentialSet) {
        for credential in set.apns {
            guard let identity = credential.certificate else { continue }
            let days = identity.daysLeft()
            metrics.gauge(.daysLeft, [("relay", "apns"), ("name", credential.name)]).set(Double(days))
            if days < Self.expiresSoonDays {
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

    package var holdsAPNs: Bool { state.withLock { !$0.set.apns.isEmpty } }
    package var holdsFCM: Bool { state.withLock { !$0.set.fcm.isEmpty } }

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
    /// (`ok`, `expires_soon` within `expiresSoonDays`, `expired`: its pushes are refused); nil without any.
    package var readiness: JSONValue? {
        let certificates = self.certificates
        guard !certificates.isEmpty else { return nil }
        let format = ISO8601DateFormatter()
        return .object(
            JSONObject(
                certificates.map { certificate in
                    let status =
                        certificate.daysLeft < 0
                        ? "expired" : certificate.daysLeft < Self.expiresSoonDays ? "expires_soon" : "ok"
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
    package var connectionCount: Int {
        state.withLock { Array($0.pools.values) }.reduce(0) { $0 + $1.upstream.connectionCount }
    }

    /// Closes every connection: the server's last step once its relays have stopped
    /// (`CredentialsService`), whichever relays ran.
    package func shutdown() async {
        let (pools, tokens) = state.withLock { ($0.pools.values, $0.tokens.values) }
        for pool in pools { try? await pool.upstream.shutdown().get() }
        for token in tokens { try? await token.shutdown().get() }
    }
}

/// Which relays hold credentials of their own, which decides who may reach them (the server's
/// exposure rule).
package struct HeldCredentials: Sendable {
    /// An APNs key or certificate: the APNs relay signs.
    package let apns: Bool
    /// A service account: the FCM relay signs.
    package let fcm: Bool

    init(_ set: CredentialSet) {
        apns = !set.apns.isEmpty
        fcm = !set.fcm.isEmpty
    }
}
