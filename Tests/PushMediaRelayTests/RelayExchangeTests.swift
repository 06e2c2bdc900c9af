import Crypto
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import PushMedia
import PushMediaTestSupport
import Testing
import _CryptoExtras

@testable import PushMediaRelay

/// The relays' one path (`Relay`) and its two policies, without sockets: requests built as the
/// transport builds them, handled on an event loop, sent to an in-process upstream that records
/// what it received and answers as Apple or Google would. A table per relay: valid pushes,
/// each refusal, held credentials and pass-through, rich and plain, a memo hit. The relays run
/// end to end, with real clients, TLS and strict stand-ins, in `scripts/apns-relay.sh`,
/// `scripts/fcm-relay.sh` and `scripts/relay-attacks.sh`.
@Suite("Relay exchange", .serialized)
struct RelayExchangeTests {
    /// What an upstream was sent, and how it answers: Apple's `200` with the push's `apns-id`, or
    /// Google's `{"name":…}`; a token endpoint's access token.
    final class RecordingUpstream: RelayUpstream, @unchecked Sendable {
        struct Sent {
            var pool: String
            var queue: QueueKey
            var push: UpstreamPush
        }
        let authority: String
        private let lock = NSLock()
        private var sent: [Sent] = []
        var connectionCount: Int { 0 }

        init(authority: String) { self.authority = authority }

        var received: [Sent] { lock.withLock { sent } }

        func send(
            _ push: UpstreamPush, pool: String, queue: QueueKey, on eventLoop: any EventLoop, reply: UpstreamReply
        ) {
            lock.withLock { sent.append(Sent(pool: pool, queue: queue, push: push)) }
            var headers = HPACKHeaders()
            var body: ByteBuffer?
            if push.path.hasPrefix("/3/device/") {
                headers.add(name: "apns-id", value: push.headers.first(name: "apns-id") ?? "upstream-made-id")
            } else if push.path.hasSuffix("/token") {
                body = ByteBuffer(string: #"{"access_token":"held-access-token","expires_in":3600}"#)
            } else {
                body = ByteBuffer(string: #"{"name":"projects/p/messages/1"}"#)
            }
            let answer = UpstreamAnswer(status: 200, headers: headers, body: body)
            eventLoop.execute { reply.succeed(answer) }
        }

        func shutdown() -> EventLoopFuture<Void> {
            MultiThreadedEventLoopGroup.singleton.any().makeSucceededVoidFuture()
        }
    }

    /// Every upstream the relays make, by authority.
    final class Upstreams: @unchecked Sendable {
        private let lock = NSLock()
        private var made: [String: RecordingUpstream] = [:]

        var maker: UpstreamMaker {
            UpstreamMaker { endpoint, _, _, _, _, _, _ throws(RelaySetupError) in self.upstream(endpoint.authority) }
        }

        func upstream(_ authority: String) -> RecordingUpstream {
            lock.withLock {
                if let known = made[authority] { return known }
                let upstream = RecordingUpstream(authority: authority)
                made[authority] = upstream
                return upstream
            }
        }
    }

    let directory = TemporaryDirectory()
    let upstreams = Upstreams()
    let origin: TestOrigin
    let relays: TestRelayParts

    /// A relay of each kind, holding an APNs key for `com.shop.app` and a service account for
    /// project `shop-1234`, passing other apps' pushes through with their own authorization.
    init() throws {
        origin = try TestOrigin()
        origin.route("/hero", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        let key = directory.file("AuthKey_K1.p8")
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: key, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        let account = try serviceAccountFile(in: directory)
        let credentials = directory.file("credentials.yaml")
        try """
        apns:
          - {name: shop, team_id: SHOPTEAM01, key_id: K1, key: \(key), topics: [com.shop.app]}
        fcm:
          - {name: shop-fcm, project_id: shop-1234, service_account: \(account)}
        """.write(toFile: credentials, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: credentials)
        var config = RelaysConfig()
        try config.set("relay-credentials", to: credentials)
        try config.set("relay-pass-through", to: "true")
        try config.set("apns-upstream", to: "https://apns.test")
        try config.set("fcm-upstream", to: "https://fcm.test")
        relays = try TestRelayParts(relays: config, store: directory, upstreams: upstreams.maker)
    }

    /// One request through `relay`, as the transport hands it over; its answer.
    static func exchange<Policy: RelayPolicy>(
        _ relay: Relay<Policy>, method: String = "POST", _ path: String, _ headers: [(String, String)],
        _ body: String, connection: ObjectIdentifier
    ) async -> RelayAnswer {
        var fields = HPACKHeaders()
        for (name, value) in headers { fields.add(name: name, value: value) }
        let exchange = RelayExchange(
            method: method, path: path, headers: fields, body: ByteBuffer(string: body), client: nil,
            connection: connection, arrival: .now, eventLoop: MultiThreadedEventLoopGroup.singleton.next())
        return await withCheckedContinuation { done in relay.handle(exchange) { done.resume(returning: $0) } }
    }

    static let token = "/3/device/" + String(repeating: "ab", count: 32)
    static let clientAuthorization = "bearer eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJPVEhFUlRFQU0xIn0.c2ln"

    static func reason(_ answer: RelayAnswer) -> String? { answer.body.flatMap(APNsPolicy.reason(of:)) }

    @Test func apnsRequests() async throws {
        let upstream = upstreams.upstream("apns.test")
        let policy = try APNsPolicy(config: relays.relays.apns, parts: relays.parts, logger: Logger(label: "t"))
        let relay = Relay(policy: policy, limits: relays.relays.limits)
        let connection = ObjectIdentifier(upstream)
        let plain = #"{"aps":{"content-available":1}}"#
        let background = [
            ("apns-topic", "com.other.app"), ("apns-push-type", "background"), ("apns-id", "ID-1"),
            ("authorization", Self.clientAuthorization),
        ]

        // Apple's refusals, answered by the relay itself: nothing goes upstream.
        let refusals: [(String, String, [(String, String)], String, Int, String)] = [
            ("GET", Self.token, background, plain, 405, "MethodNotAllowed"),
            ("POST", "/3/device/not-hex", background, plain, 404, "BadPath"),
            ("POST", "/3/other", background, plain, 404, "BadPath"),
            ("POST", Self.token, background, "", 400, "PayloadEmpty"),
            ("POST", Self.token, background, String(repeating: "x", count: 4097), 413, "PayloadTooLarge"),
        ]
        for (method, path, headers, body, status, reason) in refusals {
            let answer = await Self.exchange(relay, method: method, path, headers, body, connection: connection)
            #expect(answer.status == status && Self.reason(answer) == reason, "\(method) \(path) → \(answer.status)")
            #expect(answer.headers.first(name: "apns-id") != nil, "refusals carry an apns-id")
        }
        #expect(upstream.received.isEmpty)

        // Pass-through: the client's own authorization, byte for byte, its team's pool, its topic's queue.
        let passed = await Self.exchange(relay, Self.token, background, plain, connection: connection)
        #expect(passed.status == 200 && passed.outcome == "skipped/push_type")
        let sent = try #require(upstream.received.last)
        #expect(sent.push.path == Self.token && String(buffer: sent.push.body) == plain)
        #expect(sent.push.headers.first(name: "authorization") == Self.clientAuthorization)
        #expect(sent.pool == "OTHERTEAM1" && sent.queue.app == "com.other.app" && sent.queue.priority == 0)

        // apns-priority 5 and 1 queue after 10 within the app.
        _ = await Self.exchange(relay, Self.token, background + [("apns-priority", "5")], plain, connection: connection)
        #expect(upstream.received.last?.queue.priority == 1)

        // A held credential: chosen by topic, its own upstream and token; the client's is dropped.
        let held = await Self.exchange(
            relay, Self.token,
            [("apns-topic", "com.shop.app"), ("apns-push-type", "alert"), ("authorization", Self.clientAuthorization)],
            #"{"aps":{"alert":"Hi"}}"#, connection: connection)
        #expect(held.status == 200 && held.outcome == "skipped/not_rich")
        let shop = try #require(upstream.received.last)
        let authorization = try #require(shop.push.headers.first(name: "authorization"))
        #expect(authorization.hasPrefix("bearer ") && authorization != Self.clientAuthorization)
        #expect(ProviderToken.team(ofAuthorization: authorization) == "SHOPTEAM01")
        #expect(shop.queue.app == "shop" && shop.pool == "")

        // No entry and no authorization, pass-through on: forwarded as it came, for Apple to answer.
        let missing = await Self.exchange(
            relay, Self.token, [("apns-topic", "com.unknown.app"), ("apns-push-type", "alert")], plain,
            connection: connection)
        #expect(missing.status == 200 && upstream.received.last?.push.headers.first(name: "authorization") == nil)
        #expect(upstream.received.last?.pool == "" && upstream.received.last?.queue.app == "com.unknown.app")

        // A rich alert: its media made through the pipeline, then answered from the memo.
        let rich = #"{"aps":{"alert":"Sale","mutable-content":1},"media_url":"\#(origin.url("/hero"))"}"#
        let headers = [("apns-topic", "com.other.app"), ("authorization", Self.clientAuthorization)]
        var handled: [String] = []
        for _ in 0..<4 {
            let answer = await Self.exchange(relay, Self.token, headers, rich, connection: connection)
            #expect(answer.status == 200)
            handled.append(answer.outcome ?? "")
            let forwarded = try #require(upstream.received.last)
            let payload = try #require(try JSONValue.parse(Array(forwarded.push.body.readableBytesView)).objectValue)
            let media = try #require(payload["media_url"]?.stringValue)
            #expect(media.hasPrefix(TestRelayParts.baseURL), "the forwarded payload names the stored media")
            #expect(payload["pushmedia"] != nil)
        }
        #expect(handled.allSatisfy { $0 == "processed" }, "\(handled)")
        #expect(origin.hits("/hero") == 1)
        #expect(relays.answers.given >= 1, "the fourth identical push came from the memo")

        // Each push counted once and written as one line, with no more of the token than 8 characters.
        let pushes = relays.metrics.counts.filter { $0.hasPrefix("apns ") }
        #expect(pushes.count == refusals.count + 8 && relays.lines.lines.count == pushes.count, "\(pushes)")
        #expect(pushes.contains("apns 405 MethodNotAllowed refused") && pushes.contains("apns 200 memo"), "\(pushes)")
        #expect(relays.lines.lines.allSatisfy { $0.message == "push" })
        #expect(relays.lines.lines.compactMap { $0.fields.first { $0.0 == "device" }?.1 }.allSatisfy { $0.count <= 8 })
    }

    @Test func fcmRequests() async throws {
        let policy = try FCMPolicy(config: relays.relays.fcm, parts: relays.parts, logger: Logger(label: "t"))
        let relay = Relay(policy: policy, limits: relays.relays.limits)
        let upstream = upstreams.upstream("fcm.test")
        let connection = ObjectIdentifier(upstream)
        let message = #"{"message":{"token":"device-1","data":{"k":"v"}}}"#
        let sender = [("authorization", "Bearer sender-token"), ("content-type", "application/json")]

        // Google's refusals, in Google's shape.
        let refusals: [(String, String, Int, String)] = [
            ("POST", "/v1/projects/p/messages:other", 404, "NOT_FOUND"),
            ("GET", "/v1/projects/p/messages:send", 405, "METHOD_NOT_ALLOWED"),
        ]
        for (method, path, status, code) in refusals {
            let answer = await Self.exchange(relay, method: method, path, sender, message, connection: connection)
            let body = try #require(answer.body)
            let error = try #require(
                try JSONValue.parse(Array(body.readableBytesView)).objectValue?["error"]?.objectValue)
            #expect(answer.status == status && error["status"] == .string(code), "\(method) \(path)")
        }
        #expect(upstream.received.isEmpty)

        // Pass-through: the sender's authorization, the project as its app.
        let passed = await Self.exchange(
            relay, "/v1/projects/other-1/messages:send", sender, message, connection: connection)
        #expect(passed.status == 200 && passed.outcome?.hasPrefix("skipped") == true, "\(passed.outcome ?? "")")
        let sent = try #require(upstream.received.last)
        #expect(sent.push.headers.first(name: "authorization") == "Bearer sender-token")
        #expect(sent.queue.app == "other-1" && sent.pool == "fcm")
        #expect(String(buffer: sent.push.body) == message)

        // A held service account: its access token (from its token endpoint), not the sender's.
        let held = await Self.exchange(
            relay, "/v1/projects/shop-1234/messages:send", sender, message, connection: connection)
        #expect(held.status == 200)
        let token = try #require(upstreams.upstream("oauth.test").received.last)
        #expect(token.push.path == "/token" && String(buffer: token.push.body).contains("grant_type="))
        let signed = try #require(upstream.received.last)
        #expect(signed.push.headers.first(name: "authorization") == "Bearer held-access-token")
        #expect(signed.queue.app == "shop-fcm")

        // A message with an image: rewritten, the target put back, the same job for every device.
        let image =
            #"{"message":{"token":"device-2","notification":{"title":"Sale","image":"\#(origin.url("/hero"))"}}}"#
        for device in ["device-2", "device-3"] {
            let body = image.replacingOccurrences(of: "device-2", with: device)
            let answer = await Self.exchange(
                relay, "/v1/projects/other-1/messages:send", sender, body, connection: connection)
            #expect(answer.status == 200 && answer.outcome == "processed", "\(answer.outcome ?? "")")
            let forwarded = try #require(upstream.received.last)
            let sentMessage = try #require(
                try JSONValue.parse(Array(forwarded.push.body.readableBytesView)).objectValue?["message"]?.objectValue)
            #expect(sentMessage["token"] == .string(device))
            let imageURL = sentMessage["notification"]?.objectValue?["image"]?.stringValue ?? ""
            #expect(imageURL.hasPrefix(TestRelayParts.baseURL))
        }
        #expect(origin.hits("/hero") <= 1)
    }
}
