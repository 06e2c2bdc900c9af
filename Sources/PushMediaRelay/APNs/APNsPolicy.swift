import Foundation
import Logging
import NIOCore
import NIOHPACK
import PushMedia
import Tracing

/// Apple's provider API as a relay's policy: a push is checked as Apple would, sent with a held
/// credential (chosen by `apns-topic`) or the sender's own token, queued as its app (the
/// credential entry, or the topic), its media prepared when it is a rich alert (`aps.mutable-content:
/// 1` and a media reference), every other push forwarded byte for byte, refusals in Apple's shape.
final class APNsPolicy: RelayPolicy {
    let config: APNsRelayConfig
    let media: RelayMedia
    /// The relay's own upstream, for pass-through pushes.
    let upstream: any RelayUpstream
    /// The keys and certificates held for apps (`--relay-credentials`, `--apns-key`).
    let credentials: RelayCredentials
    let logger: Logger
    /// The push's line.
    let lines: any RelayLines
    /// Teams of recent pass-through tokens, and the last one.
    private let teams = Locked<[String: String]>([:])
    private let lastTeam = Locked<(String, String)?>(nil)

    var name: String { "apns" }

    /// The headers of a push the relay reads, found in one pass.
    struct Fields: Sendable {
        var topic: String?
        var pushType: String?
        var apnsID: String?
        var priority: String?
        var authorization: String?

        init(_ headers: HPACKHeaders) {
            for (name, value, _) in headers {
                switch name {
                case "apns-topic": topic = value
                case "apns-push-type": pushType = value
                case "apns-id": apnsID = value
                case "apns-priority": priority = value
                case "authorization": authorization = value
                default: break
                }
            }
        }
    }

    /// Where one push goes.
    struct Route: RelayRoute {
        let upstream: any RelayUpstream
        let pool: String
        let app: String
        /// The held credential's connections (a use taken until the push is answered).
        let held: APNsPool?
        /// The topic the relay chose (a certificate sender's single-topic certificate, no `apns-topic`).
        let topic: String?
        let fields: Fields

        var credential: String? { held?.credential.name }
    }

    init(config: APNsRelayConfig, parts: RelayParts, logger: Logger) throws(RelaySetupError) {
        self.config = config
        media = RelayMedia(parts: parts)
        credentials = parts.credentials
        self.logger = logger
        lines = parts.lines
        upstream = try parts.upstreams(
            config.upstreamEndpoint, timeout: config.upstreamTimeout, limits: parts.limits,
            extraCA: config.upstreamCA, caSetting: "--apns-upstream-ca", logger: logger)
    }

    /// The relay's own connections to Apple, and the held credentials' pools'.
    var upstreamConnections: Int { upstream.connectionCount + credentials.connectionCount }

    /// Whether it signs with credentials it holds or passes the sender's through.
    var listening: Logger.Metadata { ["auth": "\(credentials.holdsAPNs ? "held credentials" : "pass-through")"] }

    /// The largest body Apple takes: 4096 bytes, 5120 for VoIP.
    static func payloadLimit(pushType: String?) -> Int { pushType == "voip" ? 5120 : 4096 }

    func route(_ exchange: RelayExchange) -> Result<Route, RelayAnswer> {
        let fields = Fields(exchange.headers)
        if let (status, reason) = check(exchange, fields) {
            return .failure(Self.refusal(status, reason, apnsID: fields.apnsID))
        }
        switch credential(fields, client: exchange.client) {
        case let .held(pool, topic):
            return .success(
                Route(
                    upstream: pool.upstream, pool: "", app: pool.credential.name, held: pool, topic: topic,
                    fields: fields))
        case .passThrough:
            let team = self.team(of: fields.authorization)
            let app = fields.topic ?? team
            return .success(Route(upstream: upstream, pool: team, app: app, held: nil, topic: nil, fields: fields))
        case let .refused(status, reason):
            return .failure(Self.refusal(status, reason, apnsID: fields.apnsID))
        }
    }

    func priority(_ exchange: RelayExchange, route: Route) -> Int { QueueKey.priority(apns: route.fields.priority) }

    /// A rich alert goes through the pipeline (or the memo); anything else is forwarded as is.
    func prepare(_ exchange: RelayExchange, route: Route, span: (any Span)?) -> RelayPreparation {
        let pushType = route.fields.pushType
        guard pushType == nil || pushType == "alert" else { return .ready(.untouched(exchange.body, "push_type")) }
        let baseURL = media.baseURL()
        let key = RepeatAnswers.key(.apns, baseURL: baseURL, body: exchange.body)
        if let ready = media.fromMemo(key) { return .ready(ready) }
        let bytes = Array(exchange.body.readableBytesView)
        guard let payload = Self.richAlert(bytes, pushType: pushType) else {
            return .ready(.untouched(exchange.body, "not_rich"))
        }
        let context = PayloadContext(
            budget: config.budget, baseURL: baseURL, profile: PlatformProfile.profiles["ios"])
        return media.rewrite(
            payload, context: context, sizeAtMost: bytes.count, key: key, body: exchange.body, on: exchange.eventLoop,
            span: span)
    }

    /// The client's headers but the connection's; a held credential's push carries the relay's
    /// authorization (its token, indexed: one serves the connection's pushes for 40 minutes),
    /// never the client's.
    func authorize(_ exchange: RelayExchange, route: Route) -> RelaySigning {
        var forwarded = HPACKHeaders()
        forwarded.reserveCapacity(exchange.headers.count + 1)
        let held = route.held
        for (name, value, indexing) in exchange.headers where !isConnectionHeader(name) {
            if name == "authorization" && held != nil { continue }
            // The client's own HPACK choice: a header it sent never-indexed stays so (RFC 7541 7.1.3).
            forwarded.add(name: name, value: value, indexing: indexing)
        }
        if let topic = route.topic { forwarded.add(name: "apns-topic", value: topic) }
        if let signer = held?.signer {
            forwarded.add(name: "authorization", value: signer.authorization(), indexing: .indexable)
        }
        return .signed(forwarded)
    }

    func unavailable(_ error: any Error, exchange: RelayExchange, route: Route) -> RelayAnswer {
        logger.warning(
            "apns upstream failed",
            metadata: [
                "error": "\(error)", "upstream": "\(route.upstream.authority)",
                "credential": "\(route.credential ?? "-")",
            ])
        return Self.refusal(503, "ServiceUnavailable", apnsID: route.fields.apnsID)
    }

    func refused(_ refusal: RelayRefusal, headers: HPACKHeaders) -> RelayAnswer {
        let apnsID = headers.first(name: "apns-id")
        switch refusal {
        case .bodyTooLarge: return Self.refusal(413, "PayloadTooLarge", apnsID: apnsID)
        case .headersTooLarge: return Self.refusal(431, "HeadersTooLarge", apnsID: apnsID)
        case .overloaded: return Self.refusal(503, "ServiceUnavailable", apnsID: apnsID)
        }
    }

    /// Metrics and the push's line; the held credential's use given back.
    func finished(_ exchange: RelayExchange, route: Route?, answer: RelayAnswer, handled: RelayHandled) {
        route?.held?.release()
        let fields = route?.fields ?? Fields(exchange.headers)
        // Apple answers 200 without a body; an error's body has its reason.
        let reason = answer.status == 200 ? nil : answer.body.flatMap { Self.reason(of: $0) }
        media.metrics.apnsPush(
            status: answer.status, reason: reason, handling: handled.handling, added: handled.total - handled.upstream)
        var path = exchange.path
        // The token's first 8 characters: which device, without the token.
        let device = path.withUTF8 { bytes in
            let start = (bytes.lastIndex(of: UInt8(ascii: "/")) ?? -1) + 1
            return String(decoding: bytes[start..<min(bytes.count, start + 8)], as: UTF8.self)
        }
        lines.info(
            "push",
            [
                ("credential", route?.credential ?? "-"), ("device", device), ("handling", handled.handling.rawValue),
                ("ms", "\(handled.total.reportedMilliseconds)"), ("outcome", handled.outcome),
                ("push_type", fields.pushType ?? ""), ("reason", reason ?? ""),
                ("status", String(answer.status)), ("topic", fields.topic ?? ""),
            ], trace: handled.trace)
    }

    func shutdown() async {
        try? await upstream.shutdown().get()
    }

    /// Refusals the relay answers itself, before anything is forwarded.
    private func check(_ exchange: RelayExchange, _ fields: Fields) -> (status: Int, reason: String)? {
        guard exchange.method == "POST" else { return (405, "MethodNotAllowed") }
        guard Self.isDevicePath(exchange.path) else { return (404, "BadPath") }
        let body = exchange.body.readableBytes
        guard body > 0 else { return (400, "PayloadEmpty") }
        guard body <= Self.payloadLimit(pushType: fields.pushType) else { return (413, "PayloadTooLarge") }
        return nil
    }

    /// Whether `path` is `/3/device/<token>`: 1 to 200 hex digits.
    static func isDevicePath(_ path: String) -> Bool {
        var path = path
        return path.withUTF8 { bytes in
            let prefix = 10  // "/3/device/"
            guard bytes.count > prefix, bytes.count <= prefix + 200,
                bytes.starts(with: [0x2F, 0x33, 0x2F, 0x64, 0x65, 0x76, 0x69, 0x63, 0x65, 0x2F])
            else { return false }
            for byte in bytes[prefix...] where !byte.isHexDigit { return false }
            return true
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

    /// `--apns-allow-team`: whether a pass-through push's team may push.
    func teamAllowed(_ fields: Fields) -> Bool {
        config.allowedTeams.isEmpty || config.allowedTeams.contains(team(of: fields.authorization))
    }

    /// The payload when `bytes` is a JSON object whose `aps` has `mutable-content: 1` and, unless
    /// `apns-push-type` says alert, an `alert`.
    static func richAlert(_ bytes: [UInt8], pushType: String?) -> JSONObject? {
        guard let payload = try? JSONValue.parse(bytes).objectValue, let aps = payload["aps"]?.objectValue,
            case let .number(mutable)? = aps["mutable-content"], Double(mutable) == 1,
            pushType == "alert" || aps["alert"] != nil
        else { return nil }
        return payload
    }

    /// An answer in Apple's error shape, `{"reason":…}`, with the push's `apns-id` (or a new one:
    /// clients match answers by it).
    static func refusal(_ status: Int, _ reason: String, apnsID: String?) -> RelayAnswer {
        var headers = HPACKHeaders()
        headers.add(name: "apns-id", value: apnsID ?? UUID().uuidString)
        headers.add(name: "content-type", value: "application/json")
        return RelayAnswer(status: status, headers: headers, body: ByteBuffer(string: #"{"reason":"\#(reason)"}"#))
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
