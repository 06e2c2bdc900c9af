import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import PushMedia
import Testing

@testable import PushMediaRelay

/// The relays' two HTTP/2 ends (libnghttp2 through the shim) talking to each other: the
/// listener's connection handler and the upstream client's, each on an embedded channel, the
/// bytes one writes handed to the other. The relays run end to end with real clients and TLS in
/// `scripts/apns-relay.sh` and `scripts/fcm-relay.sh`; here the edges are driven one by one.
@Suite("Relay HTTP/2")
struct RelayHTTP2Tests {
    /// Answers each request with its body and where it went; requests to `/hold/…` wait until
    /// the test answers them.
    final class EchoEndpoint: RelayEndpoint, @unchecked Sendable {
        let limits: RelayLimits
        var held: [EventLoopPromise<RelayAnswer>] = []

        /// Bodies of at most 1 KiB, unless `limits` say otherwise.
        init(limits: RelayLimits? = nil) {
            self.limits =
                limits
                ?? {
                    var limits = RelayLimits()
                    limits.maxBody = 1024
                    return limits
                }()
        }

        func handle(_ exchange: RelayExchange, done: @escaping @Sendable (RelayAnswer) -> Void) {
            if exchange.path.hasPrefix("/hold/") {
                let promise = exchange.eventLoop.makePromise(of: RelayAnswer.self)
                promise.futureResult.whenSuccess(done)
                held.append(promise)
                return
            }
            var answer = HPACKHeaders()
            answer.add(name: "x-method", value: exchange.method)
            answer.add(name: "x-path", value: exchange.path)
            if let id = exchange.headers.first(name: "apns-id") { answer.add(name: "apns-id", value: id) }
            done(RelayAnswer(status: 200, headers: answer, body: exchange.body))
        }

        func refused(_ refusal: RelayRefusal, headers: HPACKHeaders) -> RelayAnswer {
            let (status, reason) =
                switch refusal {
                case .bodyTooLarge: (413, "PayloadTooLarge")
                case .headersTooLarge: (431, "HeadersTooLarge")
                case .overloaded: (503, "ServiceUnavailable")
                }
            return RelayAnswer(
                status: status, headers: HPACKHeaders(), body: ByteBuffer(string: #"{"reason":"\#(reason)"}"#))
        }

        func shutdown() async {}
    }

    /// A client connection and a server connection joined by hand.
    final class Pair {
        let loop = EmbeddedEventLoop()
        let endpoint: EchoEndpoint
        let server: EmbeddedChannel
        let client: EmbeddedChannel
        let clientHandler: UpstreamConnectionHandler
        let wentAway = Locked(false)

        init(timeout: TimeAmount = .seconds(5), limits: RelayLimits? = nil, budget: RelayBudget? = nil) throws {
            endpoint = EchoEndpoint(limits: limits ?? budget?.limits)
            server = EmbeddedChannel(handler: RelayHTTP2Handler(endpoint: endpoint, budget: budget), loop: loop)
            if let budget {
                let bound = NIOLoopBound(server, eventLoop: loop)
                _ = budget.open(ObjectIdentifier(server)) { reason in
                    bound.value.pipeline.fireUserInboundEventTriggered(RelayShed(reason: reason))
                }
            }
            let wentAway = wentAway
            clientHandler = UpstreamConnectionHandler(
                authority: "upstream.test", timeout: timeout, limits: RelayLimits()
            ) {
                wentAway.withLock { $0 = true }
            }
            client = EmbeddedChannel(handler: clientHandler, loop: loop)
            let address = try SocketAddress(ipAddress: "127.0.0.1", port: 1)
            try server.connect(to: address).wait()
            try client.connect(to: address).wait()
            try shuttle()
        }

        deinit {
            for promise in endpoint.held { promise.succeed(RelayAnswer(status: 200, headers: [:], body: nil)) }
            loop.run()
            _ = try? server.finish()
            _ = try? client.finish()
        }

        /// Moves bytes both ways until neither side has more to say.
        func shuttle() throws {
            var moved = true
            while moved {
                moved = false
                loop.run()
                while server.isActive, let bytes = try client.readOutbound(as: ByteBuffer.self) {
                    if bytes.readableBytes > 0 { try server.writeInbound(bytes) }
                    moved = true
                }
                while client.isActive, let bytes = try server.readOutbound(as: ByteBuffer.self) {
                    if bytes.readableBytes > 0 { try client.writeInbound(bytes) }
                    moved = true
                }
                // The server closed: so does the client's end, as TCP would tell it.
                if !server.isActive && client.isActive {
                    try client.close().wait()
                    moved = true
                }
            }
        }

        /// Sends a push; the result is filled in when its answer or failure arrives.
        func send(path: String, body: String, id: String? = nil) -> Locked<Result<UpstreamAnswer, any Error>?> {
            var headers = HPACKHeaders()
            headers.add(name: "apns-topic", value: "com.example.app")
            if let id { headers.add(name: "apns-id", value: id, indexing: .nonIndexable) }
            let result = Locked<Result<UpstreamAnswer, any Error>?>(nil)
            let promise = loop.makePromise(of: UpstreamAnswer.self)
            promise.futureResult.whenComplete { outcome in result.withLock { $0 = outcome } }
            clientHandler.send(
                UpstreamPush(path: path, headers: headers, body: ByteBuffer(string: body)),
                queue: QueueKey(app: "com.example.app", connection: ObjectIdentifier(self)),
                reply: UpstreamReply(promise))
            return result
        }
    }

    @Test func manyStreamsOnOneConnection() throws {
        let pair = try Pair()
        let results = (0..<300).map { index in
            pair.send(path: "/3/device/\(index)", body: String(repeating: "b", count: index), id: "id-\(index)")
        }
        try pair.shuttle()
        for (index, result) in results.enumerated() {
            let answer = try #require(try result.withLock { $0 }?.get())
            #expect(answer.status == 200)
            #expect(answer.headers.first(name: "x-method") == "POST")
            #expect(answer.headers.first(name: "x-path") == "/3/device/\(index)")
            #expect(answer.headers.first(name: "apns-id") == "id-\(index)")
            #expect(answer.headers.first(name: "content-length") == nil)
            #expect(answer.body.map { String(buffer: $0) } ?? "" == String(repeating: "b", count: index))
        }
        #expect(pair.server.isActive && pair.client.isActive)
        #expect(!pair.wentAway.withLock { $0 })
    }

    @Test func aBodyOverTheLimitIsAnsweredAtOnceAndTheConnectionGoesOn() throws {
        let pair = try Pair()
        let large = pair.send(path: "/3/device/large", body: String(repeating: "x", count: 5000))
        try pair.shuttle()
        let answer = try #require(try large.withLock { $0 }?.get())
        #expect(answer.status == 413)
        #expect(answer.body.map { String(buffer: $0) } == #"{"reason":"PayloadTooLarge"}"#)
        let next = pair.send(path: "/3/device/next", body: "{}")
        try pair.shuttle()
        #expect(try next.withLock { $0 }?.get().status == 200)
    }

    @Test func aPushPastItsTimeoutIsCancelledAndItsLateAnswerDropped() throws {
        let pair = try Pair(timeout: .milliseconds(300))
        let slow = pair.send(path: "/hold/slow", body: "{}")
        try pair.shuttle()
        #expect(pair.endpoint.held.count == 1)
        pair.loop.advanceTime(by: .milliseconds(400))
        try pair.shuttle()
        let failure = try #require(slow.withLock { $0 })
        #expect(throws: UpstreamFailure.self) { try failure.get() }
        // The server saw the stream reset: its late answer goes nowhere, and the connection lives.
        pair.endpoint.held.removeFirst().succeed(RelayAnswer(status: 200, headers: HPACKHeaders(), body: nil))
        try pair.shuttle()
        let next = pair.send(path: "/3/device/after", body: "{}")
        try pair.shuttle()
        #expect(try next.withLock { $0 }?.get().status == 200)
        #expect(pair.server.isActive)
    }

    @Test func drainingAnswersWhatIsInFlightThenSendsGoAway() throws {
        let pair = try Pair()
        let inFlight = pair.send(path: "/hold/one", body: "{}")
        try pair.shuttle()
        pair.server.pipeline.fireUserInboundEventTriggered(RelayDrain())
        try pair.shuttle()
        #expect(pair.server.isActive)
        #expect(!pair.wentAway.withLock { $0 })
        pair.endpoint.held.removeFirst().succeed(RelayAnswer(status: 200, headers: HPACKHeaders(), body: nil))
        try pair.shuttle()
        #expect(try inFlight.withLock { $0 }?.get().status == 200)
        #expect(pair.wentAway.withLock { $0 })
        #expect(!pair.server.isActive)
    }

    @Test func bytesThatAreNotHTTP2CloseTheConnection() throws {
        let loop = EmbeddedEventLoop()
        let server = EmbeddedChannel(handler: RelayHTTP2Handler(endpoint: EchoEndpoint()), loop: loop)
        try server.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try server.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        loop.run()
        #expect(!server.isActive)
        _ = try? server.finish()
    }

    @Test func aProtocolErrorFromTheServerFailsThePushesInFlight() throws {
        let pair = try Pair()
        let inFlight = pair.send(path: "/hold/one", body: "{}")
        try pair.shuttle()
        // A frame on stream 0 that must not be there: DATA (type 0) of length 1.
        try pair.client.writeInbound(ByteBuffer(bytes: [0, 0, 1, 0, 0, 0, 0, 0, 0, 0x41]))
        try pair.shuttle()
        #expect(throws: UpstreamFailure.self) { try inFlight.withLock { $0 }?.get() }
        #expect(!pair.client.isActive)
        #expect(pair.wentAway.withLock { $0 })
    }

    @Test func pushesQueuedBehindTheServersLimitAreRefusedUnprocessedByItsGoAway() throws {
        let pair = try Pair()
        let limit = RelayLimits().connectionStreams
        let pushes = (0..<(limit + 2)).map { pair.send(path: "/hold/\($0)", body: "{}") }
        try pair.shuttle()
        #expect(pair.endpoint.held.count == limit)
        pair.server.pipeline.fireUserInboundEventTriggered(RelayDrain())
        for promise in pair.endpoint.held { promise.succeed(RelayAnswer(status: 200, headers: [:], body: nil)) }
        pair.endpoint.held.removeAll()
        try pair.shuttle()
        for push in pushes.prefix(limit) { #expect(try push.withLock { $0 }?.get().status == 200) }
        // The two the server never saw: its GOAWAY came first, so they may be sent elsewhere.
        for push in pushes.suffix(2) {
            let result = try #require(push.withLock { $0 })
            #expect(throws: UpstreamFailure.self) { try result.get() }
            if case let .failure(error) = result, let failure = error as? UpstreamFailure {
                #expect("\(failure)" == "\(UpstreamFailure.notProcessed)")
            }
        }
    }

    @Test func streamsResetAsTheyOpenDoNotPileUpWork() throws {
        let loop = EmbeddedEventLoop()
        let endpoint = EchoEndpoint()
        let server = EmbeddedChannel(handler: RelayHTTP2Handler(endpoint: endpoint), loop: loop)
        try server.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        defer {
            for promise in endpoint.held { promise.succeed(RelayAnswer(status: 200, headers: [:], body: nil)) }
            loop.run()
            _ = try? server.finish()
        }
        var bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Self.frame(type: 4, flags: 0, stream: 0)
        let limit = RelayLimits().connectionStreams
        for index in 0..<(limit + 50) {
            let stream = UInt32(2 * index + 1)
            let fields = [
                (":method", "POST"), (":scheme", "https"), (":authority", "relay.test"), (":path", "/hold/x"),
            ]
            bytes += Self.frame(type: 1, flags: 0x5, stream: stream, payload: Self.literals(fields))
            bytes += Self.frame(type: 3, flags: 0, stream: stream, payload: [0, 0, 0, 8])  // RST_STREAM CANCEL
        }
        try server.writeInbound(ByteBuffer(bytes: bytes))
        loop.run()
        #expect(endpoint.held.count == limit)
        #expect(server.isActive)
    }

    /// HTTP/1.1 (the FCM relay's): a request must arrive whole within 10 s of its first byte; a
    /// connection idle between requests is not timed by that.
    @Test func anHTTP1RequestDribbledPastItsTimeIsClosedAndAnIdleOneIsNot() throws {
        let reasons = Locked<[ShedReason]>([])
        let budget = RelayBudget(limits: RelayLimits()) { reason in reasons.withLock { $0.append(reason) } }
        func connection() throws -> (EmbeddedChannel, EmbeddedEventLoop) {
            let loop = EmbeddedEventLoop()
            let channel = EmbeddedChannel(loop: loop)
            try RelayListener<EchoEndpoint>.serveHTTP1(
                channel.pipeline.syncOperations, endpoint: EchoEndpoint(), budget: budget)
            try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            return (channel, loop)
        }
        let (idle, idleLoop) = try connection()
        try idle.writeInbound(ByteBuffer(string: "POST /x HTTP/1.1\r\nHost: relay\r\nContent-Length: 2\r\n\r\n{}"))
        idleLoop.run()
        var answer = ""
        while let part = try idle.readOutbound(as: ByteBuffer.self) { answer += String(buffer: part) }
        #expect(answer.hasPrefix("HTTP/1.1 200"))
        idleLoop.advanceTime(by: .seconds(30))
        #expect(idle.isActive)

        let (slow, slowLoop) = try connection()
        try slow.writeInbound(ByteBuffer(string: "POST /x HTTP/1.1\r\nHost: relay\r\n"))
        for line in 0..<9 {
            slowLoop.advanceTime(by: .seconds(1))
            try slow.writeInbound(ByteBuffer(string: "x-slow-\(line): s\r\n"))
        }
        #expect(slow.isActive)
        slowLoop.advanceTime(by: .seconds(2))
        #expect(!slow.isActive)
        #expect(reasons.withLock { $0 } == [.requestHead])
        _ = try? idle.finish()
    }

    /// The error codes of the GOAWAY frames in bytes a server wrote.
    static func goAwayCodes(in bytes: [UInt8]) -> [UInt32] {
        var codes: [UInt32] = []
        var at = 0
        while bytes.count - at >= 9 {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            guard bytes.count - at - 9 >= length else { break }
            if bytes[at + 3] == 7, length >= 8 {
                codes.append(bytes[(at + 13)..<(at + 17)].reduce(0) { $0 << 8 | UInt32($1) })
            }
            at += 9 + length
        }
        return codes
    }

    /// An HTTP/2 frame.
    static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8] = []) -> [UInt8] {
        var bytes: [UInt8] = []
        for shift in [16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: payload.count >> shift)) }
        bytes += [type, flags]
        for shift in [24, 16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: stream >> UInt32(shift))) }
        return bytes + payload
    }

    /// A header block of literal fields without indexing (names and values under 127 bytes).
    static func literals(_ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0, UInt8(name.utf8.count)]
            block += Array(name.utf8)
            block.append(UInt8(value.utf8.count))
            block += Array(value.utf8)
        }
        return block
    }
}

extension UpstreamReply {
    /// Completes `promise`.
    init(_ promise: EventLoopPromise<UpstreamAnswer>) { self.init { promise.completeWith($0) } }
}
