import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOSSL
import PushMedia
import ServiceLifecycle
import Tracing

/// FCM's HTTP v1 API as a relay's policy: `POST /v1/projects/<project>/messages:send`. A message
/// is sent with a held service account (chosen by project) or the sender's own `Authorization`,
/// queued as its app (the credential entry, or the project); its images (`notification.image`,
/// each platform part's) go through the pipeline, keyed on the message without its target
/// (`token`, `topic`, `condition`), so a campaign to many devices is one job; refusals in
/// Google's shape.
final class FCMPolicy: RelayPolicy {
    let config: FCMRelayConfig
    let media: RelayMedia
    /// The relay's own upstream (`--fcm-upstream`).
    let upstream: any RelayUpstream
    /// The service accounts held for projects (`--relay-credentials`).
    let credentials: RelayCredentials
    /// The message's line.
    let lines: any RelayLines
    let logger: Logger

    var name: String { "fcm" }

    /// Where one message goes.
    struct Route: RelayRoute {
        let upstream: any RelayUpstream
        var pool: String { "fcm" }
        let app: String
        let project: String
        /// The held service account that signs it.
        let account: ServiceAccountToken?

        var credential: String? { account?.credential.name }
    }

    init(config: FCMRelayConfig, parts: RelayParts, logger: Logger) throws(RelaySetupError) {
        self.config = config
        media = RelayMedia(parts: parts)
        credentials = parts.credentials
        lines = parts.lines
        self.logger = logger
        upstream = try parts.upstreams(
            config.upstreamEndpoint, timeout: config.upstreamTimeout, limits: parts.limits,
            extraCA: config.upstreamCA, caSetting: "--fcm-upstream-ca", logger: logger)
    }

    func route(_ exchange: RelayExchange) -> Result<Route, RelayAnswer> {
        guard let project = Self.project(ofSendPath: exchange.path) else {
            let path = exchange.path
            let method = path.firstIndex(of: "?").map { String(path[..<$0]) } ?? path
            return .failure(Self.error(404, "NOT_FOUND", "no such method: \(method)"))
        }
        guard exchange.method == "POST" else {
            return .failure(Self.error(405, "METHOD_NOT_ALLOWED", "\(exchange.method) is not allowed; send POST"))
        }
        guard config.allowedProjects.isEmpty || config.allowedProjects.contains(project) else {
            return .failure(Self.error(403, "PERMISSION_DENIED", "project \(project) may not send through this relay"))
        }
        // A held service account signs for its project; the client's Authorization is then ignored.
        let account = credentials.fcmToken(forProject: project)
        if let refusal = refusal(forProject: project, account: account, client: exchange.client) {
            return .failure(refusal)
        }
        return .success(
            Route(upstream: upstream, app: account?.credential.name ?? project, project: project, account: account))
    }

    func priority(_ exchange: RelayExchange, route: Route) -> Int { 0 }

    func prepare(_ exchange: RelayExchange, route: Route, span: (any Span)?) -> RelayPreparation {
        prepare(exchange.body, on: exchange.eventLoop, span: span)
    }

    /// The client's headers but the connection's; a held account's message carries its access
    /// token instead of the client's `Authorization`.
    func authorize(_ exchange: RelayExchange, route: Route) -> RelaySigning {
        var forwarded = HPACKHeaders()
        forwarded.reserveCapacity(exchange.headers.count)
        let account = route.account
        for (name, value, indexing) in exchange.headers where !isConnectionHeader(name) {
            if account != nil && name == "authorization" { continue }
            forwarded.add(name: name, value: value, indexing: indexing)
        }
        guard let account else { return .signed(forwarded) }
        let signed: @Sendable (Result<String, TokenFailure>) -> Result<HPACKHeaders, RelayAnswer> = { [forwarded] in
            switch $0 {
            case let .success(authorization):
                var headers = forwarded
                headers.add(name: "authorization", value: authorization, indexing: .neverIndexed)
                return .success(headers)
            case let .failure(failure):
                return .failure(Self.tokenFailure(failure, credential: account.credential.name))
            }
        }
        if let kept = account.kept() {
            switch signed(kept) {
            case let .success(headers): return .signed(headers)
            case let .failure(refusal): return .refused(refusal)
            }
        }
        let promise = exchange.eventLoop.makePromise(of: Result<HPACKHeaders, RelayAnswer>.self)
        account.authorization(on: exchange.eventLoop) { promise.succeed(signed($0)) }
        return .later(promise.futureResult)
    }

    func unavailable(_ error: any Error, exchange: RelayExchange, route: Route) -> RelayAnswer {
        logger.warning(
            "fcm upstream failed", metadata: ["error": "\(error)", "upstream": "\(upstream.authority)"])
        return Self.error(503, "UNAVAILABLE", "the FCM upstream did not answer: \(error)")
    }

    func refused(_ refusal: RelayRefusal, headers: HPACKHeaders) -> RelayAnswer {
        switch refusal {
        case .bodyTooLarge: Self.error(413, "INVALID_ARGUMENT", "the request exceeds the relay's body limit")
        case .headersTooLarge: Self.error(431, "INVALID_ARGUMENT", "the request's headers exceed the relay's limit")
        case .overloaded: Self.error(503, "UNAVAILABLE", "the relay is at its bound of requests in flight; retry")
        }
    }

    /// Metrics and the message's line (the project, never the token).
    func finished(_ exchange: RelayExchange, route: Route?, answer: RelayAnswer, handled: RelayHandled) {
        if let credential = route?.credential, handled.handling != .refused {
            media.metrics.counter(.pushes, [("relay", "fcm"), ("name", credential)]).increment()
        }
        media.metrics.fcmMessage(
            status: answer.status, handling: handled.handling, added: handled.total - handled.upstream)
        let project = route?.project ?? Self.project(ofSendPath: exchange.path) ?? "-"
        lines.info(
            "fcm message",
            [
                ("credential", route?.credential ?? "-"), ("handling", handled.handling.rawValue),
                ("ms", "\(handled.total.reportedMilliseconds)"), ("outcome", handled.outcome), ("project", project),
                ("status", String(answer.status)),
            ], trace: handled.trace)
    }

    func shutdown() async {
        try? await upstream.shutdown().get()
    }

    /// The project of `/v1/projects/<project>/messages:send` (a query after it allowed).
    static func project(ofSendPath path: String) -> String? {
        var path = path
        return path.withUTF8 { bytes in
            let end = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.count
            let prefix = Array("/v1/projects/".utf8)
            let suffix = Array("/messages:send".utf8)
            guard end > prefix.count + suffix.count, bytes.starts(with: prefix),
                bytes[(end - suffix.count)..<end].elementsEqual(suffix)
            else { return nil }
            let project = bytes[prefix.count..<(end - suffix.count)]
            guard !project.contains(UInt8(ascii: "/")) else { return nil }
            return String(decoding: project, as: UTF8.self)
        }
    }

    /// The targets of a message: exactly one is given.
    static let targets = ["token", "topic", "condition"]

    /// A message's media through the pipeline (or the memo), its target put back; anything that
    /// is not a message to send goes as it came. The memo is keyed on the request without its
    /// target: its bytes when a scan finds the target (a campaign's messages then cost no parse),
    /// else the parsed message serialized without it.
    private func prepare(_ body: ByteBuffer, on eventLoop: any EventLoop, span: (any Span)?) -> RelayPreparation {
        let bytes = Array(body.readableBytesView)
        let baseURL = media.baseURL()
        let scanned = FCMTarget(scanning: bytes)
        if let scanned {
            let key = RepeatAnswers.key(.fcm, baseURL: baseURL, body: scanned.rest)
            if let ready = media.fromMemo(key, finish: { Self.withTarget($0, scanned.member) }) { return .ready(ready) }
        }
        guard let document = try? JSONValue.parse(bytes).objectValue, case var .object(message)? = document["message"]
        else { return .ready(.untouched(body, "not_a_message")) }
        if case .bool(true)? = document["validate_only"] { return .ready(.untouched(body, "validate_only")) }
        var target: [UInt8]?
        for key in Self.targets {
            if let value = message.removeValue(forKey: key) {
                target = JSONValue.string(key).serialized() + [UInt8(ascii: ":")] + value.serialized()
                break
            }
        }
        let memoKey =
            scanned.map { RepeatAnswers.key(.fcm, baseURL: baseURL, body: $0.rest) }
            ?? RepeatAnswers.key(.fcmParsed, baseURL: baseURL, body: JSONValue.object(message).serialized())
        let finish: @Sendable ([UInt8]) -> ByteBuffer = { [target] in Self.withTarget($0, target) }
        if scanned == nil, let ready = media.fromMemo(memoKey, finish: finish) { return .ready(ready) }
        return media.rewrite(
            JSONObject([("message", .object(message))]),
            context: PayloadContext(budget: config.budget, baseURL: baseURL, vendor: .fcm), sizeAtMost: bytes.count,
            key: memoKey, body: body, on: eventLoop, span: span, finish: finish)
    }

    /// `{"message":{…}}` with the target member (`"token":"…"`) first in the message.
    static func withTarget(_ payload: [UInt8], _ member: [UInt8]?) -> ByteBuffer {
        guard let member else { return ByteBuffer(bytes: payload) }
        if payload.starts(with: messagePrefix), payload.count > messagePrefix.count {
            let empty = payload[messagePrefix.count] == UInt8(ascii: "}")
            var out = ByteBuffer()
            out.reserveCapacity(payload.count + member.count + 1)
            out.writeBytes(messagePrefix)
            out.writeBytes(member)
            if !empty { out.writeInteger(UInt8(ascii: ",")) }
            out.writeBytes(payload[messagePrefix.count...])
            return out
        }
        // Not the compact form the pipeline writes: parse and set.
        guard var document = try? JSONValue.parse(payload).objectValue,
            case var .object(message)? = document["message"],
            case let .object(wrapped)? = try? JSONValue.parse([UInt8(ascii: "{")] + member + [UInt8(ascii: "}")]),
            let (key, value) = wrapped.members.first
        else { return ByteBuffer(bytes: payload) }
        message[key] = value
        document["message"] = .object(message)
        return ByteBuffer(bytes: JSONValue.object(document).serialized())
    }

    /// How the pipeline writes a message's start.
    private static let messagePrefix = Array(#"{"message":{"#.utf8)

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

}

extension FCMPolicy {
    /// Why the relay cannot send for `project`, if it cannot: an entry holds its service account
    /// (`account`) and this client may not use it (its `clients`), or none does and pass-through
    /// is off.
    func refusal(forProject project: String, account: ServiceAccountToken?, client: RelayClient?) -> RelayAnswer? {
        if let account {
            guard RelayClient.allowed(client, by: account.credential.clients) else {
                return Self.error(
                    403, "PERMISSION_DENIED", "this client may not send for project \(project) through this relay")
            }
            return nil
        }
        guard credentials.passThrough else {
            return Self.error(
                403, "PERMISSION_DENIED",
                "Permission 'cloudmessaging.messages.create' denied: this relay holds no credential for project "
                    + project)
        }
        return nil
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
