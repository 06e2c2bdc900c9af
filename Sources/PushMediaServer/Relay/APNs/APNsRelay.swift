import Foundation
import Logging
import NIOCore
import NIOHPACK
import PushMedia

/// Apple's provider API in front of the pipeline: checks a push as Apple would, prepares the
/// media of a rich alert (`aps.mutable-content: 1` and a media reference) through the same
/// pipeline, cache and memo as `/v1/process`, forwards every other push byte for byte, and
/// answers with Apple's status, headers and body plus `x-pushmedia-outcome`.
final class APNsRelay: RewritingRelay {
    let config: APNsRelayConfig
    let pipeline: Pipeline
    let upstream: HTTP2Upstream
    /// The keys and certificates held for apps (`--relay-credentials`, `--apns-key`).
    let credentials: RelayCredentials
    let metrics: ServerMetrics
    let memo: ResponseMemo
    let baseURL: @Sendable () -> String
    let logger: Logger
    /// The push's line.
    let lines: RequestLines
    private let inFlight = Locked(0)
    /// Teams of recent pass-through tokens.
    private let teams = Locked<[String: String]>([:])
    private let lastTeam = Locked<(String, String)?>(nil)

    init(
        config: APNsRelayConfig, parts: ServerParts, upstream: HTTP2Upstream, logger: Logger
    ) {
        self.config = config
        pipeline = parts.pipeline
        self.upstream = upstream
        credentials = parts.credentials
        metrics = parts.metrics
        memo = parts.memo
        let baseURL = parts.baseURL
        self.baseURL = { baseURL.withLock { $0 } }
        self.logger = logger
        lines = parts.lines
    }

    /// Bodies are read up to 64 KiB; past Apple's limit they are refused (413) by `check`.
    var bodyLimit: Int { 64 * 1024 }

    func tooLarge(headers: HPACKHeaders) -> RelayAnswer {
        Self.refusal(413, "PayloadTooLarge", apnsID: headers.first(name: "apns-id"))
    }

    /// Pushes being handled.
    var pushesInFlight: Int { inFlight.withLock { $0 } }

    /// The largest body Apple takes: 4096 bytes, 5120 for VoIP.
    static func payloadLimit(pushType: String?) -> Int { pushType == "voip" ? 5120 : 4096 }

    /// Handles one request of a client (`client`: its TLS certificate's identity, if any).
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, client: RelayClient?,
        on eventLoop: any EventLoop, done: @escaping @Sendable (RelayAnswer) -> Void
    ) {
        let start = ContinuousClock.now
        let apnsID = headers.first(name: "apns-id")
        let pushType = headers.first(name: "apns-push-type")
        var refusal = check(method: method, path: path, headers: headers, body: body, pushType: pushType)
        let route = refusal == nil ? self.route(headers: headers, client: client) : .passThrough
        if case let .refused(status, reason) = route { refusal = (status, reason) }
        if let refusal {
            let answer = Self.refusal(refusal.status, refusal.reason, apnsID: apnsID)
            finish(
                answer, outcome: nil, handling: "refused", start: start, upstreamTime: .zero, headers: headers,
                path: path)
            return done(answer)
        }
        inFlight.withLock { $0 += 1 }
        let team: String
        var forwarded = HPACKHeaders()
        forwarded.reserveCapacity(headers.count + 1)
        let pool = route.pool
        for (name, value, indexing) in headers where !isConnectionHeader(name) {
            // A held credential's push carries the relay's authorization, never the client's.
            if name == "authorization" && pool != nil { continue }
            // The client's own HPACK choice: a header it sent never-indexed stays so (RFC 7541 7.1.3);
            // a token it lets be indexed costs a table index per push instead of 200 bytes.
            forwarded.add(
                name: name, value: value,
                indexing: indexing == .indexable && UpstreamConnectionHandler.unique(name) ? .nonIndexable : indexing)
        }
        if case let .held(_, topic?) = route { forwarded.add(name: "apns-topic", value: topic) }
        if let signer = pool?.signer {
            // Indexed: one token serves the connection's pushes for 40 minutes, and the connection
            // carries this credential's pushes only.
            forwarded.add(name: "authorization", value: signer.authorization(), indexing: .indexable)
        }
        team = pool == nil ? self.team(of: headers.first(name: "authorization")) : ""
        let upstream = pool?.upstream ?? upstream
        let forward: @Sendable (RelayPrepared) -> Void = { [forwarded] prepared in
            self.forward(
                UpstreamPush(path: path, headers: forwarded, body: prepared.body), via: upstream, pool: team,
                outcome: prepared.label, on: eventLoop,
                unavailable: { error in
                    self.logger.warning(
                        "apns upstream failed",
                        metadata: [
                            "error": "\(error)", "upstream": "\(upstream.endpoint.authority)",
                            "credential": "\(pool?.credential.name ?? "-")",
                        ])
                    return Self.refusal(503, "ServiceUnavailable", apnsID: apnsID)
                },
                done: { answer, upstreamTime in
                    self.inFlight.withLock { $0 -= 1 }
                    pool?.release()
                    self.finish(
                        answer, outcome: prepared.label, handling: prepared.handling, start: start,
                        upstreamTime: upstreamTime, headers: headers, path: path, credential: pool?.credential.name)
                    done(answer)
                })
        }
        switch prepare(body: body, pushType: pushType, on: eventLoop) {
        case let .ready(prepared): forward(prepared)
        case let .later(prepared): prepared.whenSuccess(forward)
        }
    }

    /// The team of a pass-through token, remembered: tokens are reused for 20 to 60 minutes.
    private func team(of authorization: String?) -> String {
        guard let authorization else { return "" }
        // Most pushes carry the token the one before carried: a comparison, not a hash of 200 bytes.
        if let (last, team) = lastTeam.withLock({ $0 }), last == authorization { return team }
        if let team = teams.withLock({ $0[authorization] }) {
            lastTeam.withLock { $0 = (authorization, team) }
            return team
        }
        let team = ProviderToken.team(ofAuthorization: authorization) ?? ""
        teams.withLock { teams in
            if teams.count >= 1024 { teams.removeAll(keepingCapacity: true) }
            teams[authorization] = team
        }
        return team
    }

    /// A rich alert goes through the pipeline (or the memo); anything else is forwarded as is.
    private func prepare(body: ByteBuffer, pushType: String?, on eventLoop: any EventLoop) -> RelayPreparation {
        guard pushType == nil || pushType == "alert" else {
            return .ready(RelayPrepared(body: body, label: "skipped/push_type", handling: "passthrough"))
        }
        let bytes = Array(body.readableBytesView)
        let key = ResponseMemo.Key(options: memoOptions(), body: bytes)
        if let ready = fromMemo(key) { return .ready(ready) }
        guard let payload = Self.richAlert(bytes, pushType: pushType) else {
            return .ready(RelayPrepared(body: body, label: "skipped/not_rich", handling: "passthrough"))
        }
        let context = PayloadContext(
            budget: config.budget, baseURL: baseURL(), profile: PlatformProfile.profiles["ios"])
        return rewrite(payload, context: context, sizeAtMost: bytes.count, key: key, body: body, on: eventLoop)
    }

    /// What besides the body changes a rewrite: the media's base URL.
    private func memoOptions() -> String { "apns|" + baseURL() }

    /// The payload when `bytes` is a JSON object whose `aps` has `mutable-content: 1` and, unless
    /// `apns-push-type` says alert, an `alert`.
    static func richAlert(_ bytes: [UInt8], pushType: String?) -> JSONObject? {
        guard let payload = try? JSONValue.parse(bytes).objectValue, let aps = payload["aps"]?.objectValue,
            case let .number(mutable)? = aps["mutable-content"], Double(mutable) == 1,
            pushType == "alert" || aps["alert"] != nil
        else { return nil }
        return payload
    }

    /// Refusals the relay answers itself, before anything is forwarded.
    private func check(method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, pushType: String?)
        -> (status: Int, reason: String)?
    {
        guard method == "POST" else { return (405, "MethodNotAllowed") }
        let prefix = "/3/device/"
        guard path.hasPrefix(prefix), path.utf8.count > prefix.utf8.count, path.utf8.count <= prefix.utf8.count + 200,
            path.utf8.dropFirst(prefix.utf8.count).allSatisfy({ $0.isHexDigit })
        else { return (404, "BadPath") }
        guard body.readableBytes > 0 else { return (400, "PayloadEmpty") }
        guard body.readableBytes <= Self.payloadLimit(pushType: pushType) else { return (413, "PayloadTooLarge") }
        return nil
    }

    /// `--apns-allow-team`: whether a pass-through push's team may push.
    func teamAllowed(_ headers: HPACKHeaders) -> Bool {
        config.allowedTeams.isEmpty || config.allowedTeams.contains(team(of: headers.first(name: "authorization")))
    }

    /// An answer in Apple's error shape, `{"reason":…}`, with the push's `apns-id` (or a new one:
    /// clients match answers by it).
    static func refusal(_ status: Int, _ reason: String, apnsID: String?) -> RelayAnswer {
        var headers = HPACKHeaders()
        headers.add(name: "apns-id", value: apnsID ?? UUID().uuidString)
        headers.add(name: "content-type", value: "application/json")
        return RelayAnswer(status: status, headers: headers, body: ByteBuffer(string: #"{"reason":"\#(reason)"}"#))
    }

    /// Metrics and the push's log line.
    private func finish(
        _ answer: RelayAnswer, outcome: String?, handling: String, start: ContinuousClock.Instant,
        upstreamTime: Duration,
        headers: HPACKHeaders, path: String, credential: String? = nil
    ) {
        let total = ContinuousClock.now - start
        let reason = answer.body.flatMap { Self.reason(of: $0) }
        metrics.apnsPush(status: answer.status, reason: reason, handling: handling, added: total - upstreamTime)
        let device =
            path.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(path[path.index(after: $0)...].prefix(8)) } ?? ""
        lines.info(
            "push",
            [
                ("credential", credential ?? "-"), ("device", device), ("handling", handling),
                ("ms", "\(total.reportedMilliseconds)"), ("outcome", outcome ?? ""),
                ("push_type", headers.first(name: "apns-push-type") ?? ""), ("reason", reason ?? ""),
                ("status", String(answer.status)), ("topic", headers.first(name: "apns-topic") ?? ""),
            ])
    }

    /// The `reason` of an error body.
    static func reason(of body: ByteBuffer) -> String? {
        guard body.readableBytes <= 4096, let object = try? JSONValue.parse(Array(body.readableBytesView)).objectValue,
            case let .string(reason)? = object["reason"]
        else { return nil }
        return reason
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
