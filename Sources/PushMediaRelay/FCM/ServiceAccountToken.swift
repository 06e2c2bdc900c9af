import Foundation
import Logging
import NIOCore
import NIOHPACK
import PushMedia
import _CryptoExtras

/// A service account's `token_uri`: the HTTPS server and the path posted to.
struct TokenEndpoint: Sendable, Equatable {
    var endpoint: UpstreamEndpoint
    var path: String

    init?(uri: String) {
        guard let url = URL(string: uri), url.scheme == "https", let host = url.host, !host.isEmpty else { return nil }
        endpoint = UpstreamEndpoint(host: host, port: url.port ?? 443)
        path = (url.path.isEmpty ? "/" : url.path) + (url.query.map { "?" + $0 } ?? "")
    }
}

/// Why no access token could be had; says nothing secret.
enum TokenFailure: Error, CustomStringConvertible {
    case unreachable(String)
    case refused(status: Int, error: String)
    case malformed

    var description: String {
        switch self {
        case let .unreachable(why): "the token endpoint did not answer: \(why)"
        case let .refused(status, error): "the token endpoint answered \(status) \(error)"
        case .malformed: "the token endpoint's answer has no access_token and expires_in"
        }
    }
}

/// The access tokens of one service account (OAuth 2.0 JWT bearer grant, RFC 7523): an RS256
/// assertion posted to its `token_uri`, the token kept until 5 minutes before `expires_in` ends.
/// One refresh at a time: requests that need a token meanwhile wait for that one.
final class ServiceAccountToken: Sendable {
    let credential: FCMCredential
    private let endpoint: TokenEndpoint
    private let upstream: any RelayUpstream
    private let logger: Logger
    /// The scope FCM's HTTP v1 API asks for.
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// How long a failed refresh is remembered before the next one is tried.
    static let retryAfter: Duration = .seconds(2)

    private struct Waiter {
        var eventLoop: any EventLoop
        var done: @Sendable (Result<String, TokenFailure>) -> Void
    }
    private struct State {
        var token: String?
        var validUntil = ContinuousClock.Instant.now
        var failure: (TokenFailure, ContinuousClock.Instant)?
        var waiters: [Waiter] = []
        var refreshing = false
    }
    private let state = Locked(State())

    /// `extraCA` (`--fcm-upstream-ca`) is trusted at the token endpoint too.
    init(
        credential: FCMCredential, timeout: Duration, limits: RelayLimits, extraCA: String?, logger: Logger,
        upstreams: UpstreamMaker = .http2
    ) throws(RelaySetupError) {
        self.credential = credential
        guard let endpoint = TokenEndpoint(uri: credential.tokenURI) else {
            throw .incomplete("fcm entry \(credential.name): token_uri is not an https:// URL")
        }
        self.endpoint = endpoint
        upstream = try upstreams(
            endpoint.endpoint, timeout: timeout, limits: limits, extraCA: extraCA, caSetting: "--fcm-upstream-ca",
            logger: logger)
        self.logger = logger
    }

    /// `Bearer <access token>` when one is kept, or the failure of a refresh too recent to try
    /// again; nil when a refresh is needed (`authorization(on:_:)`).
    func kept(now: ContinuousClock.Instant = .now) -> Result<String, TokenFailure>? {
        state.withLock { state in
            if let token = state.token, now < state.validUntil { return .success("Bearer " + token) }
            if let (failure, at) = state.failure, now - at < Self.retryAfter { return .failure(failure) }
            return nil
        }
    }

    /// `Bearer <access token>`, now when one is kept, else once the refresh under way (or a new
    /// one) ends; `done` runs on `eventLoop`.
    func authorization(on eventLoop: any EventLoop, _ done: @escaping @Sendable (Result<String, TokenFailure>) -> Void)
    {
        let now = ContinuousClock.now
        enum Next {
            case ready(Result<String, TokenFailure>)
            case wait
            case refresh
        }
        let next: Next = state.withLock { state in
            if let token = state.token, now < state.validUntil { return .ready(.success("Bearer " + token)) }
            if let (failure, at) = state.failure, now - at < Self.retryAfter { return .ready(.failure(failure)) }
            state.waiters.append(Waiter(eventLoop: eventLoop, done: done))
            if state.refreshing { return .wait }
            state.refreshing = true
            return .refresh
        }
        switch next {
        case let .ready(result): done(result)
        case .wait: break
        case .refresh: refresh(on: eventLoop)
        }
    }

    /// The JWT assertion, issued at `issuedAt` (Unix seconds), valid for an hour.
    func assertion(issuedAt: Int) -> String {
        var header: [(String, JSONValue)] = [("alg", .string("RS256")), ("typ", .string("JWT"))]
        if let kid = credential.privateKeyID { header.append(("kid", .string(kid))) }
        let claims: [(String, JSONValue)] = [
            ("iss", .string(credential.clientEmail)), ("scope", .string(Self.scope)),
            ("aud", .string(credential.tokenURI)), ("iat", .number(String(issuedAt))),
            ("exp", .number(String(issuedAt + 3600))),
        ]
        let input =
            Base64URL.encode(JSONValue.object(JSONObject(header)).serialized()) + "."
            + Base64URL.encode(JSONValue.object(JSONObject(claims)).serialized())
        let signature =
            (try? credential.key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5).rawRepresentation)
            ?? Data()
        return input + "." + Base64URL.encode(Array(signature))
    }

    private func refresh(on eventLoop: any EventLoop) {
        let body =
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="
            + assertion(issuedAt: Int(Date().timeIntervalSince1970))
        var headers = HPACKHeaders()
        headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        headers.add(name: "accept", value: "application/json")
        let sent = ContinuousClock.now
        upstream.send(
            UpstreamPush(path: endpoint.path, headers: headers, body: ByteBuffer(string: body)), pool: "token",
            queue: QueueKey(app: credential.name, connection: ObjectIdentifier(self)), on: eventLoop,
            reply: UpstreamReply { result in
                let outcome: Result<(String, Duration), TokenFailure>
                switch result {
                case let .failure(error): outcome = .failure(.unreachable("\(error)"))
                case let .success(answer): outcome = Self.token(in: answer)
                }
                self.finish(outcome, sent: sent)
            })
    }

    /// `access_token` and `expires_in` of a 200 answer.
    static func token(in answer: UpstreamAnswer) -> Result<(String, Duration), TokenFailure> {
        let object = answer.body.flatMap { try? JSONValue.parse(Array($0.readableBytesView)).objectValue }
        guard answer.status == 200 else {
            var error = "error"
            if case let .string(code)? = object?["error"] { error = code }
            return .failure(.refused(status: answer.status, error: String(error.prefix(64))))
        }
        guard case let .string(token)? = object?["access_token"], !token.isEmpty,
            case let .number(expires)? = object?["expires_in"], let seconds = Double(expires), seconds > 0
        else { return .failure(.malformed) }
        return .success((token, .seconds(seconds)))
    }

    private func finish(_ outcome: Result<(String, Duration), TokenFailure>, sent: ContinuousClock.Instant) {
        let waiters: [Waiter] = state.withLock { state in
            state.refreshing = false
            switch outcome {
            case let .success((token, lifetime)):
                state.token = token
                // Kept until 5 minutes before it ends (half its life when that is shorter than 10).
                state.validUntil = sent + (lifetime > .seconds(600) ? lifetime - .seconds(300) : lifetime / 2)
                state.failure = nil
            case let .failure(failure):
                state.failure = (failure, .now)
            }
            defer { state.waiters = [] }
            return state.waiters
        }
        let result: Result<String, TokenFailure>
        switch outcome {
        case let .success((token, _)): result = .success("Bearer " + token)
        case let .failure(failure):
            result = .failure(failure)
            logger.warning(
                "fcm access token refused",
                metadata: [
                    "credential": "\(credential.name)", "project": "\(credential.projectID)", "why": "\(failure)",
                ])
        }
        for waiter in waiters {
            let done = waiter.done
            waiter.eventLoop.execute { done(result) }
        }
    }

    /// Closes the connection to the token endpoint.
    func shutdown() -> EventLoopFuture<Void> { upstream.shutdown() }
}
