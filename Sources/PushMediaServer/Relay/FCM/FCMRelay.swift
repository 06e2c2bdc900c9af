import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOSSL
import PushMedia
import ServiceLifecycle

/// FCM's HTTP v1 API in front of the pipeline: `POST /v1/projects/<project>/messages:send`. The
/// message's images (`notification.image`, each platform part's) go through the same pipeline,
/// cache and memo as `/v1/process`; the rewritten request goes to `--fcm-upstream` with the
/// client's `Authorization`, and Google's answer comes back unchanged plus `x-pushmedia-outcome`.
/// The work is keyed on the message without its target (`token`, `topic`, `condition`), so a
/// campaign to many devices is one job.
final class FCMRelay: RewritingRelay {
    let config: FCMRelayConfig
    let pipeline: Pipeline
    let upstream: HTTP2Upstream
    /// The service accounts held for projects (`--relay-credentials`).
    let credentials: RelayCredentials
    let metrics: ServerMetrics
    let memo: ResponseMemo
    /// The message's line.
    let lines: RequestLines
    let baseURL: @Sendable () -> String
    let logger: Logger

    /// The largest request body taken: 64 KiB.
    static let bodyLimit = 64 * 1024

    init(config: FCMRelayConfig, parts: ServerParts, logger: Logger) throws(RelaySetupError) {
        self.config = config
        pipeline = parts.pipeline
        credentials = parts.credentials
        metrics = parts.metrics
        memo = parts.memo
        lines = parts.lines
        let baseURL = parts.baseURL
        self.baseURL = { baseURL.withLock { $0 } }
        self.logger = logger
        upstream = try HTTP2Upstream(
            endpoint: config.upstreamEndpoint, timeout: config.upstreamTimeout, extraCA: config.upstreamCA,
            caSetting: "--fcm-upstream-ca", logger: logger)
    }

    /// Bodies past 64 KiB are answered 413 (FCM's own limit is 4 KiB of payload, with headroom for
    /// the rest of the message).
    var bodyLimit: Int { Self.bodyLimit }

    func tooLarge(headers: HPACKHeaders) -> RelayAnswer {
        Self.error(413, "INVALID_ARGUMENT", "the request exceeds \(Self.bodyLimit) bytes")
    }

    /// Answers one request: refusals at once, a message from the memo on the event loop, a new one
    /// once the pipeline is done.
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, client: RelayClient?,
        on eventLoop: any EventLoop, done: @escaping @Sendable (RelayAnswer) -> Void
    ) {
        let start = ContinuousClock.now
        let route = path.firstIndex(of: "?").map { String(path[..<$0]) } ?? path
        var refusal: RelayAnswer?
        let project = Self.project(ofSendPath: route)
        if let project {
            if method != "POST" {
                refusal = Self.error(405, "METHOD_NOT_ALLOWED", "\(method) is not allowed; send POST")
            } else if !config.allowedProjects.isEmpty, !config.allowedProjects.contains(project) {
                refusal = Self.error(403, "PERMISSION_DENIED", "project \(project) may not send through this relay")
            } else {
                refusal = nil
            }
        } else {
            refusal = Self.error(404, "NOT_FOUND", "no such method: \(route)")
        }
        // A held service account signs for its project; the client's Authorization is then ignored.
        var held: ServiceAccountToken?
        if refusal == nil, let project {
            (held, refusal) = self.account(for: project, client: client)
        }
        let account = held
        if let refusal {
            finish(
                refusal, outcome: "", handling: "refused", start: start, upstreamTime: .zero, project: project ?? "-")
            return done(refusal)
        }
        var forwarded = HPACKHeaders()
        forwarded.reserveCapacity(headers.count)
        for (name, value, indexing) in headers where !isConnectionHeader(name) {
            if account != nil && name == "authorization" { continue }
            forwarded.add(name: name, value: value, indexing: indexing)
        }
        let send: @Sendable (RelayPrepared, HPACKHeaders) -> Void = { prepared, forwarded in
            self.forward(
                UpstreamPush(path: path, headers: forwarded, body: prepared.body), pool: "fcm",
                outcome: prepared.label, on: eventLoop,
                unavailable: { error in
                    self.logger.warning(
                        "fcm upstream failed",
                        metadata: ["error": "\(error)", "upstream": "\(self.upstream.endpoint.authority)"])
                    return Self.error(503, "UNAVAILABLE", "the FCM upstream did not answer: \(error)")
                },
                done: { answer, upstreamTime in
                    if let account {
                        self.metrics.counter(.pushes, [("relay", "fcm"), ("name", account.credential.name)]).increment()
                    }
                    self.finish(
                        answer, outcome: prepared.label, handling: prepared.handling, start: start,
                        upstreamTime: upstreamTime, project: project ?? "-", credential: account?.credential.name)
                    done(answer)
                })
        }
        let forward: @Sendable (RelayPrepared) -> Void = { [forwarded] prepared in
            guard let account else { return send(prepared, forwarded) }
            account.authorization(on: eventLoop) { result in
                switch result {
                case let .success(authorization):
                    var headers = forwarded
                    headers.add(name: "authorization", value: authorization, indexing: .neverIndexed)
                    send(prepared, headers)
                case let .failure(failure):
                    let answer = Self.tokenFailure(failure, credential: account.credential.name)
                    self.finish(
                        answer, outcome: prepared.label, handling: prepared.handling, start: start, upstreamTime: .zero,
                        project: project ?? "-", credential: account.credential.name)
                    done(answer)
                }
            }
        }
        switch prepare(body, on: eventLoop) {
        case let .ready(prepared): forward(prepared)
        case let .later(prepared): prepared.whenSuccess(forward)
        }
    }

    /// The project of `/v1/projects/<project>/messages:send`.
    static func project(ofSendPath path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "v1", parts[2] == "projects", !parts[3].isEmpty,
            parts[4] == "messages:send"
        else { return nil }
        return String(parts[3])
    }

    /// The targets of a message: exactly one is given.
    static let targets = ["token", "topic", "condition"]

    /// A message's media through the pipeline (or the memo), its target put back; anything that
    /// is not a message to send goes as it came. The memo is keyed on the request without its
    /// target: its bytes when a scan finds the target (a campaign's messages then cost no parse),
    /// else the parsed message serialized without it.
    private func prepare(_ body: ByteBuffer, on eventLoop: any EventLoop) -> RelayPreparation {
        let bytes = Array(body.readableBytesView)
        let scanned = FCMTarget(scanning: bytes)
        if let scanned {
            let key = ResponseMemo.Key(options: "fcm|" + baseURL(), body: scanned.rest)
            if let ready = fromMemo(key, finish: { Self.withTarget($0, scanned.member) }) { return .ready(ready) }
        }
        guard let document = try? JSONValue.parse(bytes).objectValue, case var .object(message)? = document["message"]
        else { return .ready(RelayPrepared(body: body, label: "skipped/not_a_message", handling: "passthrough")) }
        if case .bool(true)? = document["validate_only"] {
            return .ready(RelayPrepared(body: body, label: "skipped/validate_only", handling: "passthrough"))
        }
        var target: [UInt8]?
        for key in Self.targets {
            if let value = message.removeValue(forKey: key) {
                target = JSONValue.string(key).serialized() + [UInt8(ascii: ":")] + value.serialized()
                break
            }
        }
        let memoKey =
            scanned.map { ResponseMemo.Key(options: "fcm|" + baseURL(), body: $0.rest) }
            ?? ResponseMemo.Key(options: "fcm-parsed|" + baseURL(), body: JSONValue.object(message).serialized())
        let finish: @Sendable ([UInt8]) -> [UInt8] = { [target] in Self.withTarget($0, target) }
        if scanned == nil, let ready = fromMemo(memoKey, finish: finish) { return .ready(ready) }
        return rewrite(
            JSONObject([("message", .object(message))]),
            context: PayloadContext(budget: config.budget, baseURL: baseURL(), vendor: .fcm), sizeAtMost: bytes.count,
            key: memoKey, body: body, on: eventLoop, finish: finish)
    }

    /// `{"message":{…}}` with the target member (`"token":"…"`) first in the message.
    static func withTarget(_ payload: [UInt8], _ member: [UInt8]?) -> [UInt8] {
        guard let member else { return payload }
        let prefix = Array(#"{"message":{"#.utf8)
        if payload.starts(with: prefix), payload.count > prefix.count {
            let empty = payload[prefix.count] == UInt8(ascii: "}")
            return prefix + member + (empty ? [] : [UInt8(ascii: ",")]) + payload[prefix.count...]
        }
        // Not the compact form the pipeline writes: parse and set.
        guard var document = try? JSONValue.parse(payload).objectValue,
            case var .object(message)? = document["message"],
            case let .object(wrapped)? = try? JSONValue.parse([UInt8(ascii: "{")] + member + [UInt8(ascii: "}")]),
            let (key, value) = wrapped.members.first
        else { return payload }
        message[key] = value
        document["message"] = .object(message)
        return JSONValue.object(document).serialized()
    }

    /// An error in Google's shape: `{"error":{"code":…,"message":…,"status":…}}`.
    static func error(_ code: Int, _ status: String, _ message: String) -> RelayAnswer {
        let body = JSONValue.object(
            JSONObject([
                (
                    "error",
                    .object(
                        JSONObject([
                            ("code", .number(String(code))), ("message", .string(message)), ("status", .string(status)),
                        ]))
                )
            ])
        ).serialized()
        var headers = HPACKHeaders()
        headers.add(name: "content-type", value: "application/json; charset=UTF-8")
        return RelayAnswer(status: code, headers: headers, body: ByteBuffer(bytes: body))
    }

    /// Metrics and the message's log line (the project, never the token).
    private func finish(
        _ answer: RelayAnswer, outcome: String, handling: String, start: ContinuousClock.Instant,
        upstreamTime: Duration, project: String, credential: String? = nil
    ) {
        let total = ContinuousClock.now - start
        metrics.fcmMessage(status: answer.status, handling: handling, added: total - upstreamTime)
        lines.info(
            "fcm message",
            [
                ("credential", credential ?? "-"), ("handling", handling), ("ms", "\(total.reportedMilliseconds)"),
                ("outcome", outcome), ("project", project), ("status", String(answer.status)),
            ])
    }
}

/// The FCM relay's listener: HTTP/1.1 and h2c (prior knowledge) on one cleartext port, or with a
/// certificate TLS with ALPN `h2` and `http/1.1`.
public struct FCMRelayService: Service {
    let relay: FCMRelay
    let tls: NIOSSLContext?
    let limits: RelayLimits
    let onRunning: @Sendable (_ port: Int, _ tls: Bool) async -> Void

    /// Checks the settings and the access rule, reads the certificate and prepares the upstream.
    public init(
        parts: ServerParts, logger: Logger, onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) {
        let config = parts.server.fcm
        try config.validate()
        // Held service accounts make the relay a signing service: loopback or client certificates only.
        if !isLoopback(config.host) && config.clientCA == nil
            && (config.allowedProjects.isEmpty || parts.credentials.holdsFCM)
        {
            guard parts.server.insecureNoAuth else { throw .unrestrictedFCM(host: config.host) }
            logger.warning(
                "the FCM relay takes messages from anyone (--insecure-no-auth)", metadata: ["address": "\(config.host)"]
            )
        }
        relay = try FCMRelay(config: config, parts: parts, logger: logger)
        tls = try serverTLS(
            certificate: config.tlsCertificate, key: config.tlsKey, clientCA: config.clientCA,
            protocols: ["h2", "http/1.1"], what: "--fcm-tls-cert/--fcm-tls-key")
        limits = parts.server.relay
        self.onRunning = onRunning
    }

    public func run() async throws {
        let config = relay.config
        try await relay.serve(
            host: config.host, port: config.port, tls: tls, http1: true,
            drainLimit: config.budget + config.upstreamTimeout + .seconds(1), limits: limits,
            onShed: { [metrics = relay.metrics] in metrics.relayShed(relay: "fcm", reason: $0) }, onRunning: onRunning)
    }
}

extension FCMRelay {
    /// The service account held for `project`, or the refusal when the relay cannot send for it:
    /// this client may not use the entry (its `clients`), or no entry and pass-through is off.
    func account(for project: String, client: RelayClient?) -> (ServiceAccountToken?, RelayAnswer?) {
        if let account = credentials.fcmToken(forProject: project) {
            guard RelayClient.allowed(client, by: account.credential.clients) else {
                return (
                    nil,
                    Self.error(
                        403, "PERMISSION_DENIED", "this client may not send for project \(project) through this relay")
                )
            }
            return (account, nil)
        }
        guard credentials.passThrough else {
            return (
                nil,
                Self.error(
                    403, "PERMISSION_DENIED",
                    "Permission 'cloudmessaging.messages.create' denied: this relay holds no credential for project "
                        + project)
            )
        }
        return (nil, nil)
    }

    /// The answer when a held service account got no access token: 401 when the token endpoint
    /// refused it, 503 when it did not answer.
    static func tokenFailure(_ failure: TokenFailure, credential: String) -> RelayAnswer {
        if case .refused = failure {
            return error(401, "UNAUTHENTICATED", "the relay's credential \(credential) got no access token: \(failure)")
        }
        return error(503, "UNAVAILABLE", "the relay's credential \(credential) got no access token: \(failure)")
    }
}
