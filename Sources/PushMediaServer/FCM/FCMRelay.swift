import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import PushMedia
import ServiceLifecycle

/// FCM's HTTP v1 API in front of the pipeline: `POST /v1/projects/<project>/messages:send`. The
/// message's images (`notification.image`, each platform part's) go through the same pipeline,
/// cache and memo as `/v1/process`; the rewritten request goes to `--fcm-upstream` with the
/// client's `Authorization`, and Google's answer comes back unchanged plus `x-pushmedia-outcome`.
/// The work is keyed on the message without its target (`token`, `topic`, `condition`), so a
/// campaign to many devices is one job.
final class FCMRelay: Sendable {
    let config: FCMRelayConfig
    let pipeline: Pipeline
    let upstream: HTTP2Upstream
    let metrics: ServerMetrics
    let memo: ResponseMemo
    let baseURL: @Sendable () -> String
    let logger: Logger

    /// The largest request body taken: 64 KiB.
    static let bodyLimit = 64 * 1024

    init(config: FCMRelayConfig, parts: ServerParts, logger: Logger) throws(RelaySetupError) {
        self.config = config
        pipeline = parts.pipeline
        metrics = parts.metrics
        memo = parts.memo
        let baseURL = parts.baseURL
        self.baseURL = { baseURL.withLock { $0 } }
        self.logger = logger
        upstream = try HTTP2Upstream(
            endpoint: config.upstreamEndpoint, timeout: config.upstreamTimeout, extraCA: config.upstreamCA,
            caSetting: "--fcm-upstream-ca", logger: logger)
    }

    /// Answers one request.
    func handle(_ request: Request) async -> Response {
        let start = ContinuousClock.now
        let path = request.uri.path
        guard let project = Self.project(ofSendPath: path) else {
            return finish(Self.error(404, "NOT_FOUND", "no such method: \(path)"), "refused", start, .zero, "-")
        }
        guard request.method == .post else {
            return finish(
                Self.error(405, "METHOD_NOT_ALLOWED", "\(request.method) is not allowed; send POST"), "refused", start,
                .zero, project)
        }
        if !config.allowedProjects.isEmpty, !config.allowedProjects.contains(project) {
            return finish(
                Self.error(403, "PERMISSION_DENIED", "project \(project) may not send through this relay"), "refused",
                start, .zero, project)
        }
        let body: [UInt8]
        do {
            body = Array(try await request.body.collect(upTo: Self.bodyLimit).readableBytesView)
        } catch {
            return finish(
                Self.error(413, "INVALID_ARGUMENT", "the request exceeds \(Self.bodyLimit) bytes"), "refused", start,
                .zero, project)
        }
        let prepared = await prepare(body)
        var headers = HPACKHeaders()
        for field in request.headers where !isConnectionHeader(field.name.canonicalName) {
            headers.add(name: field.name.canonicalName, value: field.value)
        }
        let sent = ContinuousClock.now
        let eventLoop = MultiThreadedEventLoopGroup.singleton.any()
        let push = UpstreamPush(path: path, headers: headers, body: ByteBuffer(bytes: prepared.body))
        var response: Response
        do {
            let answer = try await upstream.send(push, team: "fcm", on: eventLoop).get()
            var fields = HTTPFields()
            for (name, value, _) in answer.headers {
                guard let field = HTTPField.Name(name), !isConnectionHeader(name) else { continue }
                fields.append(HTTPField(name: field, value: value))
            }
            response = Response(
                status: .init(code: answer.status), headers: fields,
                body: .init(byteBuffer: answer.body ?? ByteBuffer()))
        } catch {
            logger.warning(
                "fcm upstream failed", metadata: ["error": "\(error)", "upstream": "\(upstream.endpoint.authority)"])
            response = Self.error(503, "UNAVAILABLE", "the FCM upstream did not answer: \(error)")
        }
        response.headers[HTTPField.Name("x-pushmedia-outcome")!] = prepared.label
        return finish(response, prepared.handling, start, ContinuousClock.now - sent, project)
    }

    /// The project of `/v1/projects/<project>/messages:send`.
    static func project(ofSendPath path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "v1", parts[2] == "projects", !parts[3].isEmpty,
            parts[4] == "messages:send"
        else { return nil }
        return String(parts[3])
    }

    /// The body to forward and what was done to it.
    struct Prepared: Sendable {
        var body: [UInt8]
        /// `x-pushmedia-outcome`.
        var label: String
        /// `processed`, `memo` or `passthrough`.
        var handling: String
    }

    /// The targets of a message: exactly one is given.
    static let targets = ["token", "topic", "condition"]

    /// A message's media through the pipeline (or the memo), its target put back; anything that
    /// is not a message to send goes as it came.
    private func prepare(_ body: [UInt8]) async -> Prepared {
        guard let document = try? JSONValue.parse(body).objectValue, case var .object(message)? = document["message"]
        else { return Prepared(body: body, label: "skipped/not_a_message", handling: "passthrough") }
        if case .bool(true)? = document["validate_only"] {
            return Prepared(body: body, label: "skipped/validate_only", handling: "passthrough")
        }
        var target: (key: String, value: JSONValue)?
        for key in Self.targets {
            if let value = message.removeValue(forKey: key) {
                target = (key, value)
                break
            }
        }
        let memoKey = ResponseMemo.Key(options: "fcm|" + baseURL(), body: JSONValue.object(message).serialized())
        if let ready = memo.payload(memoKey, store: pipeline.store) {
            metrics.record(ready.outcome)
            return Prepared(
                body: Self.withTarget(ready.bytes, target),
                label: ProcessRoutes<AppRequestContext>.label(ready.outcome),
                handling: "memo")
        }
        let result = await pipeline.process(
            JSONObject([("message", .object(message))]),
            context: PayloadContext(budget: config.budget, baseURL: baseURL(), vendor: .fcm))
        metrics.record(result.outcome)
        let label = ProcessRoutes<AppRequestContext>.label(result.outcome)
        guard result.outcome.status != .skipped else {
            return Prepared(body: body, label: label, handling: "passthrough")
        }
        let rewritten = memo.keepPayload(memoKey, result: result) ?? result.bytes
        return Prepared(body: Self.withTarget(rewritten, target), label: label, handling: "processed")
    }

    /// `{"message":{…}}` with the target first in the message.
    static func withTarget(_ payload: [UInt8], _ target: (key: String, value: JSONValue)?) -> [UInt8] {
        guard let target else { return payload }
        let prefix = Array(#"{"message":{"#.utf8)
        let member = JSONValue.string(target.key).serialized() + [UInt8(ascii: ":")] + target.value.serialized()
        if payload.starts(with: prefix), payload.count > prefix.count {
            let empty = payload[prefix.count] == UInt8(ascii: "}")
            return prefix + member + (empty ? [] : [UInt8(ascii: ",")]) + payload[prefix.count...]
        }
        // Not the compact form the pipeline writes: parse and set.
        guard var document = try? JSONValue.parse(payload).objectValue, case var .object(message)? = document["message"]
        else { return payload }
        message[target.key] = target.value
        document["message"] = .object(message)
        return JSONValue.object(document).serialized()
    }

    /// An error in Google's shape: `{"error":{"code":…,"message":…,"status":…}}`.
    static func error(_ code: Int, _ status: String, _ message: String) -> Response {
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
        return Response(
            status: .init(code: code), headers: [.contentType: "application/json; charset=UTF-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// Metrics and the message's log line (the project, never the token).
    private func finish(
        _ response: Response, _ handling: String, _ start: ContinuousClock.Instant, _ upstreamTime: Duration,
        _ project: String
    ) -> Response {
        let total = ContinuousClock.now - start
        metrics.fcmMessage(status: response.status.code, handling: handling, added: total - upstreamTime)
        logger.info(
            "fcm message",
            metadata: [
                "project": "\(project)", "status": "\(response.status.code)",
                "outcome": "\(response.headers[HTTPField.Name("x-pushmedia-outcome")!] ?? "")",
                "handling": "\(handling)", "ms": "\(total.reportedMilliseconds)",
            ])
        return response
    }
}

/// The FCM relay's listener: HTTP/1.1, or with a certificate TLS with ALPN `h2` and `http/1.1`.
public struct FCMRelayService: Service {
    let application: Application<CallbackResponder<BasicRequestContext>>

    /// Checks the settings and the access rule, reads the certificate and prepares the upstream.
    public init(
        parts: ServerParts, logger: Logger, onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) {
        let config = parts.server.fcm
        try config.validate()
        if !isLoopback(config.host) && config.clientCA == nil && config.allowedProjects.isEmpty {
            guard parts.server.insecureNoAuth else { throw .unrestrictedFCM(host: config.host) }
            logger.warning(
                "the FCM relay takes messages from anyone (--insecure-no-auth)", metadata: ["address": "\(config.host)"]
            )
        }
        let relay = try FCMRelay(config: config, parts: parts, logger: logger)
        let server: HTTPServerBuilder
        let tls = config.tlsCertificate != nil
        if let certificate = config.tlsCertificate, let key = config.tlsKey {
            let configuration = try serverTLS(
                certificate: certificate, key: key, clientCA: config.clientCA, protocols: ["h2", "http/1.1"],
                what: "--fcm-tls-cert/--fcm-tls-key")
            do { server = try .http2Upgrade(tlsConfiguration: configuration) } catch {
                throw .unreadable(what: "--fcm-tls-cert/--fcm-tls-key", path: certificate, why: "\(error)")
            }
        } else {
            server = .http1()
        }
        application = Application(
            responder: CallbackResponder { request, _ in await relay.handle(request) },
            server: server,
            configuration: .init(address: .hostname(config.host, port: config.port ?? 0), serverName: nil),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? config.port ?? 0, tls) },
            logger: logger)
    }

    public func run() async throws {
        try await application.run()
    }
}
