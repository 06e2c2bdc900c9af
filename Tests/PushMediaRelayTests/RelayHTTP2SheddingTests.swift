import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import PushMedia
import Testing

@testable import PushMediaRelay

/// The listener's bounds on what clients hold: unread answers, bytes per connection and in all,
/// the count of connections, empty DATA frames.
extension RelayHTTP2Tests {
    @Test func aClientThatReadsNothingIsShedAfterTheUnreadTimeout() throws {
        var limits = RelayLimits()
        limits.unreadTimeout = .seconds(2)
        let pair = try Pair(limits: limits)
        let push = pair.send(path: "/3/device/unread", body: "{}")
        // The request reaches the server; its answer cannot be written (the client reads nothing).
        pair.server.isWritable = false
        pair.loop.run()
        while let bytes = try pair.client.readOutbound(as: ByteBuffer.self) { try pair.server.writeInbound(bytes) }
        pair.loop.advanceTime(by: .seconds(1))
        #expect(pair.server.isActive)
        pair.loop.advanceTime(by: .seconds(3))
        var written: [UInt8] = []
        while let bytes = try pair.server.readOutbound(as: ByteBuffer.self) {
            written += Array(bytes.readableBytesView)
        }
        #expect(Self.goAwayCodes(in: written) == [0xb])
        pair.loop.advanceTime(by: .seconds(2))
        #expect(!pair.server.isActive)
        try pair.shuttle()
        #expect(throws: UpstreamFailure.self) { try push.withLock { $0 }?.get() }
    }

    @Test func aClientThatReadsSlowlyIsNotShed() throws {
        var limits = RelayLimits()
        limits.unreadTimeout = .seconds(2)
        let pair = try Pair(limits: limits)
        for round in 0..<6 {
            let push = pair.send(path: "/3/device/\(round)", body: String(repeating: "r", count: 500))
            try pair.shuttle()
            pair.loop.advanceTime(by: .seconds(1))
            #expect(try push.withLock { $0 }?.get().status == 200)
        }
        #expect(pair.server.isActive)
    }

    @Test func requestsPastTheConnectionsBytesAreRefusedAndTheRestGoOn() throws {
        var limits = RelayLimits()
        limits.connectionBytes = 1000
        let reasons = Locked<[ShedReason]>([])
        let budget = RelayBudget(limits: limits) { reason in reasons.withLock { $0.append(reason) } }
        let pair = try Pair(budget: budget)
        let first = pair.send(path: "/hold/first", body: String(repeating: "a", count: 600))
        let second = pair.send(path: "/hold/second", body: String(repeating: "b", count: 600))
        try pair.shuttle()
        #expect(pair.endpoint.held.count == 1)
        let refused = try #require(second.withLock { $0 })
        if case let .failure(error) = refused {
            #expect("\(error)" == "\(UpstreamFailure.notProcessed)")
        } else {
            Issue.record("the second request was not refused: \(refused)")
        }
        #expect(reasons.withLock { $0 } == [.connectionBytes])
        pair.endpoint.held.removeFirst().succeed(RelayAnswer(status: 200, headers: [:], body: nil))
        try pair.shuttle()
        #expect(try first.withLock { $0 }?.get().status == 200)
        let third = pair.send(path: "/3/device/third", body: String(repeating: "c", count: 600))
        try pair.shuttle()
        #expect(try third.withLock { $0 }?.get().status == 200)
    }

    /// The connection holding most is shed; the one asking, holding little, is served.
    @Test func pastTheRelaysTotalTheConnectionHoldingMostIsShedAndTheOthersGoOn() throws {
        var limits = RelayLimits()
        limits.maxStreams = 10
        let reasons = Locked<[ShedReason]>([])
        let budget = RelayBudget(limits: limits) { reason in reasons.withLock { $0.append(reason) } }
        let greedy = try Pair(budget: budget)
        let modest = try Pair(budget: budget)
        let held = (0..<10).map { greedy.send(path: "/hold/\($0)", body: "{}") }
        try greedy.shuttle()
        #expect(greedy.endpoint.held.count == 10)
        #expect(reasons.withLock { $0 }.isEmpty)
        let push = modest.send(path: "/hold/modest", body: "{}")
        try modest.shuttle()
        try greedy.shuttle()
        #expect(reasons.withLock { $0 } == [.streams])
        #expect(greedy.wentAway.withLock { $0 })
        #expect(!greedy.server.isActive)
        for result in held { #expect(throws: UpstreamFailure.self) { try result.withLock { $0 }?.get() } }
        modest.endpoint.held.removeFirst().succeed(RelayAnswer(status: 200, headers: [:], body: nil))
        try modest.shuttle()
        #expect(try push.withLock { $0 }?.get().status == 200)
        #expect(modest.server.isActive && !modest.wentAway.withLock { $0 })
    }

    /// Past the total with only light connections (a few requests each), none is shed.
    @Test func connectionsHoldingLittleAreNeverShed() throws {
        var limits = RelayLimits()
        limits.maxStreams = 2
        let reasons = Locked<[ShedReason]>([])
        let budget = RelayBudget(limits: limits) { reason in reasons.withLock { $0.append(reason) } }
        let pairs = try (0..<3).map { _ in try Pair(budget: budget) }
        let pushes = pairs.map { $0.send(path: "/hold/light", body: "{}") }
        for pair in pairs { try pair.shuttle() }
        #expect(pairs.allSatisfy { $0.endpoint.held.count == 1 && $0.server.isActive })
        for pair in pairs {
            pair.endpoint.held.removeFirst().succeed(RelayAnswer(status: 200, headers: [:], body: nil))
            try pair.shuttle()
        }
        for push in pushes { #expect(try push.withLock { $0 }?.get().status == 200) }
        #expect(budget.totals.streams == 0)
    }

    @Test func theRelaysConnectionCountIsBounded() {
        var limits = RelayLimits()
        limits.maxConnections = 2
        let budget = RelayBudget(limits: limits) { _ in }
        let channels = (0..<3).map { _ in EmbeddedChannel() }
        let ids = channels.map { ObjectIdentifier($0) }
        #expect(budget.open(ids[0]) { _ in })
        #expect(budget.open(ids[1]) { _ in })
        #expect(!budget.open(ids[2]) { _ in })
        budget.close(ids[0])
        #expect(budget.open(ids[2]) { _ in })
    }

    /// CVE-2019-9518: a stream carrying DATA frames of no length without end ends the connection
    /// with `GOAWAY ENHANCE_YOUR_CALM`; a few of them do not.
    @Test func emptyDataFramesPastTheBoundEndTheConnection() throws {
        for (count, shed) in [(64, false), (65, true)] {  // PM_H2_MAX_EMPTY_DATA: 64
            let loop = EmbeddedEventLoop()
            let reasons = Locked<[ShedReason]>([])
            let budget = RelayBudget(limits: RelayLimits()) { reason in reasons.withLock { $0.append(reason) } }
            let server = EmbeddedChannel(
                handler: RelayHTTP2Handler(endpoint: EchoEndpoint(), budget: budget), loop: loop)
            _ = budget.open(ObjectIdentifier(server)) { _ in }
            try server.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            let fields = [(":method", "POST"), (":scheme", "https"), (":authority", "relay.test"), (":path", "/x")]
            var bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Self.frame(type: 4, flags: 0, stream: 0)
            bytes += Self.frame(type: 1, flags: 0x4, stream: 1, payload: Self.literals(fields))
            for _ in 0..<count { bytes += Self.frame(type: 0, flags: 0, stream: 1) }
            try server.writeInbound(ByteBuffer(bytes: bytes))
            loop.run()
            var written: [UInt8] = []
            while let out = try server.readOutbound(as: ByteBuffer.self) { written += Array(out.readableBytesView) }
            #expect(Self.goAwayCodes(in: written) == (shed ? [0xb] : []), "\(count) empty DATA frames")
            #expect(server.isActive == !shed)
            #expect(reasons.withLock { $0 } == (shed ? [.emptyData] : []))
            _ = try? server.finish()
        }
    }
}

extension RelayBudget {
    /// What all connections hold: requests in flight, and bytes.
    var totals: (streams: Int, bytes: Int) { state.withLock { ($0.streams, $0.bytes) } }
}
