import CHTTP2Shim
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOPosix
import NIOSSL
import PushMedia
import ServiceLifecycle

/// What a relay answers one request: its own refusal or the upstream's answer. `headers` has no
/// pseudo-headers and no `content-length` (set for the body written).
struct RelayAnswer: Sendable {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer?
}

/// A relay served by a `RelayListener`: it answers complete requests.
protocol RelayEndpoint: Sendable {
    /// The largest request body read; a longer one is answered with `tooLarge` at once.
    var bodyLimit: Int { get }
    /// Answers one request: `done` is called once, on `eventLoop` (at once for a refusal).
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, on eventLoop: any EventLoop,
        done: @escaping @Sendable (RelayAnswer) -> Void)
    /// The same, with the identity of a client that presented a TLS certificate. An endpoint
    /// implements one of the two (`RelayForward.swift` gives each a default calling the other).
    func handle(
        method: String, path: String, headers: HPACKHeaders, body: ByteBuffer, client: RelayClient?,
        on eventLoop: any EventLoop, done: @escaping @Sendable (RelayAnswer) -> Void)
    /// The answer to a body over `bodyLimit`.
    func tooLarge(headers: HPACKHeaders) -> RelayAnswer
    /// Where requests go.
    var upstream: HTTP2Upstream { get }
}

extension RelayEndpoint {
    /// Serves until graceful shutdown (see `RelayListener`), then closes the upstream connections.
    func serve(
        host: String, port: Int?, tls: NIOSSLContext?, http1: Bool, drainLimit: Duration,
        limits: RelayLimits = RelayLimits(), onShed: @escaping @Sendable (_ reason: String) -> Void = { _ in },
        onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) async throws {
        try await RelayListener(
            endpoint: self, host: host, port: port, tls: tls, http1: http1, drainLimit: drainLimit,
            budget: RelayBudget(limits: limits, onShed: onShed)
        ).run { port in await onRunning(port, tls != nil) }
        try? await upstream.shutdown().get()
    }

    /// Sends `push` on `pool`'s connection of `eventLoop` of the relay's own upstream (see
    /// `forward(_:via:…)`).
    func forward(
        _ push: UpstreamPush, pool: String, outcome: String, on eventLoop: any EventLoop,
        unavailable: @escaping @Sendable (any Error) -> RelayAnswer,
        done: @escaping @Sendable (RelayAnswer, _ upstreamTime: Duration) -> Void
    ) {
        forward(
            push, via: upstream, pool: pool, outcome: outcome, on: eventLoop, unavailable: unavailable, done: done)
    }
}

/// A relay's listener: HTTP/2, over TLS or cleartext with prior knowledge (h2c), and with `http1`
/// HTTP/1.1 too, told apart by the HTTP/2 connection preface (so TLS without ALPN works, and h2c
/// and HTTP/1.1 share the cleartext port). Requests are handled on their connection's event loop.
/// `run` returns after a graceful shutdown: accepting stops, each connection finishes the requests
/// in flight on it, then gets `GOAWAY` (HTTP/2) or is closed (HTTP/1.1).
struct RelayListener<Endpoint: RelayEndpoint>: Sendable {
    let endpoint: Endpoint
    let host: String
    let port: Int?
    let tls: NIOSSLContext?
    let http1: Bool
    /// How long connections may take to finish their requests once shutdown began.
    let drainLimit: Duration
    /// What all connections may hold together, and each one.
    let budget: RelayBudget

    /// Serves until graceful shutdown; `onRunning` gets the bound port.
    func run(onRunning: @Sendable (_ port: Int) async -> Void) async throws {
        let endpoint = endpoint
        let tls = tls
        let http1 = http1
        let budget = budget
        let clients = Locked<[ObjectIdentifier: any Channel]>([:])
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // Reads of at most 16 KiB: TLS keeps a buffer per connection as large as the most
            // one read decrypted (a burst of 64 KiB reads left 180 KiB on each connection).
            .childChannelOption(
                .recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 16384)
            )
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let id = ObjectIdentifier(channel)
                    let admitted = budget.open(id) { reason in
                        channel.pipeline.fireUserInboundEventTriggered(RelayShed(reason: reason))
                    }
                    guard admitted else {
                        budget.count("connections")
                        channel.close(promise: nil)
                        return
                    }
                    channel.closeFuture.whenComplete { _ in budget.close(id) }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(RelayIdleGuard())
                    if let tls {
                        try sync.addHandler(NIOSSLServerHandler(context: tls))
                        try sync.addHandler(RelayHandshakeGuard(budget: budget))
                    }
                    if http1 {
                        try sync.addHandler(RelayProtocolSniffer(endpoint: endpoint, budget: budget))
                    } else {
                        try Self.serveHTTP2(sync, endpoint: endpoint, budget: budget)
                    }
                    clients.withLock { $0[id] = channel }
                    channel.closeFuture.whenComplete { _ in _ = clients.withLock { $0.removeValue(forKey: id) } }
                }
            }
            .bind(host: host, port: port ?? 0).get()
        let trimming = budget.trimWhenQuiet(on: MultiThreadedEventLoopGroup.singleton.next())
        defer { trimming.cancel() }
        await onRunning(server.localAddress?.port ?? port ?? 0)
        try? await gracefulShutdown()
        try? await server.close()
        for channel in clients.withLock({ Array($0.values) }) {
            channel.pipeline.fireUserInboundEventTriggered(RelayDrain())
        }
        let limit = ContinuousClock.now + drainLimit
        while !clients.withLock({ $0.isEmpty }) && ContinuousClock.now < limit {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in clients.withLock({ Array($0.values) }) {
            try? await channel.close()
        }
    }

    static func serveHTTP2(
        _ sync: ChannelPipeline.SynchronousOperations, endpoint: Endpoint, budget: RelayBudget
    ) throws {
        try sync.addHandler(RelayHTTP2Handler(endpoint: endpoint, budget: budget))
    }

    static func serveHTTP1(
        _ sync: ChannelPipeline.SynchronousOperations, endpoint: Endpoint, budget: RelayBudget
    ) throws {
        let requestGuard = RelayRequestGuard(budget: budget)
        try sync.addHandler(requestGuard)
        try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
        try sync.addHandler(RelayHTTP1Handler(endpoint: endpoint, budget: budget, requestGuard: requestGuard))
    }
}

/// Asks a connection to go at once: it holds more than the relay can give it (see `RelayBudget`).
struct RelayShed {
    var reason: String
}

/// What all of a relay's client connections hold together (`RelayLimits`'s totals), and what
/// each holds. Requests count from the moment they are handed to the endpoint until it answers,
/// whether or not their connection is still open (the work goes on, and holds memory, after a
/// client resets its stream or goes). Past a total the connection holding most is shed
/// (`RelayShed`), and new requests are refused on connections that hold more than a little;
/// a connection with a few requests in flight, as a legitimate sender has, is still served. It
/// also gives memory back once what held it is gone (`trimWhenQuiet`).
final class RelayBudget: Sendable {
    let limits: RelayLimits
    /// A connection holding less than this is served even past the totals.
    static let lightStreams = 8
    static let lightBytes = 256 * 1024
    private let onShed: @Sendable (_ reason: String) -> Void
    private struct Usage {
        /// Requests in the endpoint's hands, and bytes held (theirs and the session's).
        var streams = 0
        var bytes = 0
        /// Bytes the session holds (requests being read, answers waiting, frames queued).
        var sessionBytes = 0
        var shed = false
        let shedNow: @Sendable (_ reason: String) -> Void
    }
    private struct State {
        var connections: [ObjectIdentifier: Usage] = [:]
        /// Requests in the endpoints' hands, and their bytes plus what the open sessions hold.
        var streams = 0
        var bytes = 0
        /// Since memory was last given back: the most bytes held, and connections closed.
        var peakBytes = 0
        var closed = 0

        /// The open connection, not yet shed, holding most streams (or bytes); never one that
        /// holds only a little (see `lightStreams`).
        mutating func heaviest(byBytes: Bool) -> (ObjectIdentifier, Usage)? {
            var best: (ObjectIdentifier, Usage)?
            for (id, usage) in connections where !usage.shed && !RelayBudget.light(usage) {
                let measure = byBytes ? usage.bytes : usage.streams
                if measure > 0, measure > (best.map { byBytes ? $0.1.bytes : $0.1.streams } ?? 0) {
                    best = (id, usage)
                }
            }
            if let (id, _) = best { connections[id]?.shed = true }
            return best
        }
    }
    private let state = Locked(State())

    private static func light(_ usage: Usage) -> Bool {
        usage.streams < lightStreams && usage.bytes < lightBytes
    }

    init(limits: RelayLimits, onShed: @escaping @Sendable (_ reason: String) -> Void) {
        self.limits = limits
        self.onShed = onShed
    }

    /// Admits a new connection, false when the relay holds `maxConnections` already.
    func open(_ id: ObjectIdentifier, shed: @escaping @Sendable (_ reason: String) -> Void) -> Bool {
        state.withLock { state in
            guard state.connections.count < limits.maxConnections else { return false }
            state.connections[id] = Usage(shedNow: shed)
            return true
        }
    }

    /// A connection closed: what its session held is free (its requests in flight are not).
    func close(_ id: ObjectIdentifier) {
        state.withLock { state in
            guard let usage = state.connections.removeValue(forKey: id) else { return }
            state.bytes -= usage.sessionBytes
            state.closed += 1
        }
    }

    /// Counts one thing shed, by the bound that shed it.
    func count(_ reason: String) { onShed(reason) }

    /// A request of `bytes` on connection `id` is to be handed to the endpoint: nil when it may
    /// (then `finished` must follow once it is answered), or why not. Past a total, the
    /// connection holding most is shed, and this request is refused unless its connection holds
    /// only a little and is not the one shed.
    func admit(_ id: ObjectIdentifier, bytes: Int) -> String? {
        let (refusal, victim): (String?, (@Sendable (String) -> Void, String)?) = state.withLock { state in
            let overStreams = state.streams + 1 > limits.maxStreams
            let overBytes = state.bytes + bytes > limits.maxBuffered
            var victim: (@Sendable (String) -> Void, String)?
            if overStreams || overBytes {
                let reason = overBytes ? "buffered" : "streams"
                let heaviest = state.heaviest(byBytes: overBytes)
                victim = heaviest.map { ($0.1.shedNow, reason) }
                let light = state.connections[id].map(Self.light) ?? true
                if !light || heaviest?.0 == id { return (reason, victim) }
            }
            state.streams += 1
            state.bytes += bytes
            state.peakBytes = max(state.peakBytes, state.bytes)
            return (nil, victim)
        }
        if let (shed, reason) = victim {
            onShed(reason)
            shed(reason)
        }
        return refusal
    }

    /// An admitted request was answered (or its connection is gone and the work ended).
    func finished(bytes: Int) {
        state.withLock { state in
            state.streams -= 1
            state.bytes -= bytes
        }
    }

    /// What connection `id` holds now: requests in the endpoint's hands, the bytes it holds in
    /// all, and of those what its session holds. Past the bytes total (sessions grow too:
    /// requests being read, answers waiting), the connection holding most is shed.
    func update(_ id: ObjectIdentifier, streams: Int, bytes: Int, sessionBytes: Int) {
        let victim: (@Sendable (String) -> Void)? = state.withLock { state in
            guard var usage = state.connections[id] else { return nil }
            state.bytes += sessionBytes - usage.sessionBytes
            state.peakBytes = max(state.peakBytes, state.bytes)
            usage.streams = streams
            usage.bytes = bytes
            usage.sessionBytes = sessionBytes
            state.connections[id] = usage
            guard state.bytes > limits.maxBuffered else { return nil }
            return state.heaviest(byBytes: true)?.1.shedNow
        }
        if let victim {
            onShed("buffered")
            victim("buffered")
        }
    }

    /// What all connections hold: requests in flight, and bytes.
    var totals: (streams: Int, bytes: Int) { state.withLock { ($0.streams, $0.bytes) } }

    /// Every 2 s, gives the allocator's free memory back to the system (`pm_trim_memory`, on
    /// NIO's thread pool: it may take a while) once what held much of it is gone: many
    /// connections closed, or the bytes held down to a quarter of a peak of 4 MiB or more.
    func trimWhenQuiet(on eventLoop: any EventLoop) -> RepeatedTask {
        eventLoop.scheduleRepeatedTask(initialDelay: .seconds(2), delay: .seconds(2)) { _ in
            let trim = self.state.withLock { state in
                let quiet = state.bytes <= state.peakBytes / 4
                guard quiet, state.closed >= 16 || state.peakBytes >= 4 * 1024 * 1024 else { return false }
                state.closed = 0
                state.peakBytes = state.bytes
                return true
            }
            if trim { NIOThreadPool.singleton.submit { _ in pm_trim_memory() } }
        }
    }
}

/// Closes a TLS connection that has not delivered its first bytes through TLS in time
/// (`RelayLimits.handshakeTimeout`): a client that starts a handshake and dribbles it, or never
/// sends a request once it is done, holds nothing longer. Sits after the TLS handler, and goes
/// once the first decrypted bytes pass.
final class RelayHandshakeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let budget: RelayBudget
    private var deadline: Scheduled<Void>?

    init(budget: RelayBudget) { self.budget = budget }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        let budget = budget
        deadline = context.eventLoop.scheduleTask(in: TimeAmount(budget.limits.handshakeTimeout)) {
            budget.count("handshake")
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// Asks a connection to close once the requests in flight on it are answered.
struct RelayDrain {}

/// Closes connections that stay silent: one that has sent nothing 10 s after it opened (no TLS
/// handshake, no request) is closed; one silent for 10 minutes is drained (its requests in
/// flight answered, then closed), and closed 60 s later if draining did not end it.
final class RelayIdleGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// How long a new connection may take to send its first bytes.
    static let firstBytes = TimeAmount.seconds(10)
    /// How long a connection may stay silent once it has spoken.
    static let idle = TimeAmount.minutes(10)
    private var lastRead = NIODeadline.now()
    private var spoke = false
    private var check: Scheduled<Void>?

    func handlerAdded(context: ChannelHandlerContext) {
        lastRead = .now()
        schedule(context, at: lastRead + Self.firstBytes)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = .now()
        spoke = true
        context.fireChannelRead(data)
    }

    private func schedule(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(deadline: deadline) {
            let (idleGuard, context) = loopBound.value
            idleGuard.expire(context)
        }
    }

    private func expire(_ context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        guard spoke else { return context.close(promise: nil) }
        let due = lastRead + Self.idle
        if NIODeadline.now() < due { return schedule(context, at: due) }
        context.fireUserInboundEventTriggered(RelayDrain())
        let channel = context.channel
        check = context.eventLoop.scheduleTask(in: .seconds(60)) { channel.close(promise: nil) }
    }
}

/// The first handler of a connection that may speak either HTTP version: reads until the bytes
/// match the HTTP/2 connection preface or cannot, sets up the pipeline for that version, and
/// hands it what was read.
final class RelayProtocolSniffer<Endpoint: RelayEndpoint>: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private static var preface: [UInt8] { Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) }
    private let endpoint: Endpoint
    private let budget: RelayBudget
    private var buffered: ByteBuffer?

    init(endpoint: Endpoint, budget: RelayBudget) {
        self.endpoint = endpoint
        self.budget = budget
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if buffered == nil {
            buffered = bytes
        } else {
            buffered!.writeBuffer(&bytes)
        }
        let seen = buffered!.readableBytesView
        let preface = Self.preface
        let compared = min(seen.count, preface.count)
        let matches = seen.prefix(compared).elementsEqual(preface.prefix(compared))
        guard !matches || compared == preface.count else { return }  // too few bytes to tell yet
        do {
            let sync = context.pipeline.syncOperations
            if matches {
                try RelayListener.serveHTTP2(sync, endpoint: endpoint, budget: budget)
            } else {
                try RelayListener.serveHTTP1(sync, endpoint: endpoint, budget: budget)
            }
        } catch {
            context.close(promise: nil)
            return
        }
        let first = buffered!
        buffered = nil
        context.fireChannelRead(wrapInboundOut(first))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Shutdown or shedding before a request began: nothing to finish.
        if event is RelayDrain || event is RelayShed {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// The server side of one HTTP/2 client connection: libnghttp2 collects each stream's request (a
/// body past the endpoint's limit is answered at once), the endpoint answers it, and the answer
/// goes out on the same stream. What is answered in one turn of the event loop is written and
/// flushed together. The connection stays within its bounds (`RelayLimits`): requests past its
/// streams or bytes are refused, and a client that leaves its answers unread past
/// `unreadTimeout`, or that the relay's `RelayBudget` sheds, gets `GOAWAY ENHANCE_YOUR_CALM`.
final class RelayHTTP2Handler<Endpoint: RelayEndpoint>: ChannelInboundHandler, HTTP2ConnectionHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let endpoint: Endpoint
    private let budget: RelayBudget?
    private let limits: RelayLimits
    let session: HTTP2Session
    /// Streams handed to the endpoint and not yet answered. Also those the client reset: their
    /// work goes on, so past `connectionStreams` new ones are refused (a client resetting
    /// streams as fast as it opens them gets no more work done than one that waits).
    private var answering = 0
    /// Bytes of the requests handed to the endpoint and not yet answered.
    private var answeringBytes = 0
    /// What was last reported to the budget.
    private var reported = (streams: 0, bytes: 0)
    private var draining = false
    private var closing = false
    /// Answers waiting for a client that reads nothing: since when, and how much had been sent then.
    private var stuckSince: NIODeadline?
    private var sentWhenStuck: UInt64 = 0
    private var watch: RepeatedTask?
    /// The connection's key in the budget (the listener admitted it under it).
    private var channelID: ObjectIdentifier?
    /// libnghttp2 was told to end the session for a flood of empty DATA frames, and it was counted.
    private var countedFlood = false
    /// The client's certificate identity, read at its first request.
    private var client: RelayClient??

    init(endpoint: Endpoint, budget: RelayBudget? = nil, limits: RelayLimits? = nil) {
        self.endpoint = endpoint
        self.budget = budget
        self.limits = limits ?? budget?.limits ?? RelayLimits()
        session = HTTP2Session(
            serverBodyLimit: endpoint.bodyLimit, maxStreams: UInt32(clamping: self.limits.connectionStreams))
    }

    /// The server's SETTINGS go first (buffered by TLS until its handshake is done).
    func handlerAdded(context: ChannelHandlerContext) {
        channelID = ObjectIdentifier(context.channel)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        watch = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
            let (handler, context) = loopBound.value
            handler.checkUnread(context)
        }
        if context.channel.isActive { pump(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        watch?.cancel()
        watch = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        pump(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        receive(unwrapInboundIn(data), context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stuckSince = nil
            pump(context)
        }
        context.fireChannelWritabilityChanged()
    }

    func handleEvents(_ context: ChannelHandlerContext) {
        session.handleEvents { event in
            switch event.kind {
            case PM_H2_REQUEST:
                if answering >= limits.connectionStreams {
                    refuse(event.streamID, "connection_streams")
                } else if held(plus: event.bodyLength) > limits.connectionBytes {
                    refuse(event.streamID, "connection_bytes")
                } else if let channelID, let reason = budget?.admit(channelID, bytes: event.bodyLength) {
                    session.refuse(event.streamID)
                    budget?.count(reason)
                } else {
                    dispatch(event.streamID, event.message(), context: context)
                }
            case PM_H2_TOO_LARGE:
                respond(endpoint.tooLarge(headers: event.message().headers), on: event.streamID)
            default:
                break
            }
        }
        report()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        pump(context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let shed = event as? RelayShed { return calmDown(context, shed.reason) }
        guard event is RelayDrain else { return context.fireUserInboundEventTriggered(event) }
        draining = true
        pump(context)
    }

    /// A connection error (TLS, the socket): the connection closes once the requests in flight
    /// on it are answered.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        draining = true
        pump(context)
    }

    /// Closes the connection when libnghttp2 is done with it (a protocol error, or the client's
    /// `GOAWAY` with nothing left in flight), or when draining and nothing is in flight: then
    /// `GOAWAY` after the answers (some clients, those on Python's h2 among them, drop answers
    /// that come after it), then close.
    func pumped(_ context: ChannelHandlerContext) {
        report()
        guard !closing else { return }
        let done = !session.alive
        guard done || (draining && answering == 0) else { return }
        closing = true
        if !done {
            session.goAway()
            session.pump(context, always: true)
        }
        closeAfterWrites(context)
    }

    /// Bytes this connection holds, with `more` besides: requests in the endpoint's hands, and
    /// what the session keeps.
    private func held(plus more: Int = 0) -> Int { answeringBytes + sessionHeld() + more }

    /// What the session keeps: requests being read, answers not yet sent, frames queued (an
    /// estimate of 128 bytes each).
    private func sessionHeld() -> Int {
        let load = session.load
        return Int(load.received_bytes) + Int(load.waiting_bytes) + 128 * Int(load.outbound_frames)
    }

    private func report() {
        guard let budget, let channelID, !closing else { return }
        if !countedFlood && session.load.flooded != 0 {
            countedFlood = true
            budget.count("empty_data")
        }
        let sessionBytes = sessionHeld()
        let now = (streams: answering, bytes: answeringBytes + sessionBytes)
        guard now != reported else { return }
        reported = now
        budget.update(channelID, streams: now.streams, bytes: now.bytes, sessionBytes: sessionBytes)
    }

    private func refuse(_ id: Int32, _ reason: String) {
        session.refuse(id)
        budget?.count(reason)
    }

    /// Sheds this connection: `GOAWAY ENHANCE_YOUR_CALM`, written even if the client reads
    /// nothing, then closed (at once if what was written before does not go out within a second).
    private func calmDown(_ context: ChannelHandlerContext, _ reason: String) {
        guard !closing else { return }
        closing = true
        session.calmDown()
        session.pump(context, always: true)
        closeAfterWrites(context)
        let channel = context.channel
        context.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
        if let channelID { budget?.update(channelID, streams: 0, bytes: 0, sessionBytes: 0) }
    }

    /// Sheds a client that has read nothing of its answers for `unreadTimeout`: answers wait
    /// for its flow-control window, or its socket is not read (the channel stays unwritable).
    private func checkUnread(_ context: ChannelHandlerContext) {
        guard !closing, context.channel.isActive else { return }
        let load = session.load
        let stuck = load.waiting > 0 || !context.channel.isWritable
        guard stuck else {
            stuckSince = nil
            return
        }
        let now = context.eventLoop.now
        if stuckSince == nil || load.sent_bytes != sentWhenStuck {
            stuckSince = now
            sentWhenStuck = load.sent_bytes
            return
        }
        if let since = stuckSince, now - since >= TimeAmount(limits.unreadTimeout) {
            budget?.count("unread")
            calmDown(context, "unread")
        }
    }

    private func dispatch(_ id: Int32, _ request: HTTP2Message, context: ChannelHandlerContext) {
        answering += 1
        let bytes = request.body.readableBytes
        answeringBytes += bytes
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let budget = budget
        if client == nil { client = .some(RelayClient.of(context)) }
        endpoint.handle(
            method: request.method, path: request.path, headers: request.headers, body: request.body,
            client: client ?? nil, on: context.eventLoop
        ) { answer in
            budget?.finished(bytes: bytes)
            let (handler, context) = loopBound.value
            handler.respond(answer, on: id)
            handler.answering -= 1
            handler.answeringBytes -= bytes
            handler.pumpSoon(context)
        }
    }

    private func respond(_ answer: RelayAnswer, on id: Int32) {
        session.respond(id, status: answer.status, headers: answer.headers, body: answer.body)
    }
}

/// The server side of one HTTP/1.1 client connection: one request at a time (SwiftNIO's pipelining
/// handler holds the next until the answer is written), a body past the endpoint's limit answered
/// at once and the connection closed.
final class RelayHTTP1Handler<Endpoint: RelayEndpoint>: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: Endpoint
    private let budget: RelayBudget?
    private let requestGuard: RelayRequestGuard?
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var answering = false
    private var draining = false
    /// The client's certificate identity, read at its first request.
    private var client: RelayClient??

    init(endpoint: Endpoint, budget: RelayBudget? = nil, requestGuard: RelayRequestGuard? = nil) {
        self.endpoint = endpoint
        self.budget = budget
        self.requestGuard = requestGuard
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(requestHead):
            head = requestHead
            body = nil
            if requestHead.headers[canonicalForm: "expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                // curl waits a second for this before it sends a larger body.
                let interim = HTTPResponseHead(version: requestHead.version, status: .continue)
                context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
            }
        case var .body(part):
            guard let requestHead = head else { return }
            if body == nil { body = part } else { body!.writeBuffer(&part) }
            if body!.readableBytes > endpoint.bodyLimit {
                head = nil
                body = nil
                answering = true
                write(endpoint.tooLarge(headers: Self.headers(of: requestHead)), keepAlive: false, context: context)
            }
        case .end:
            requestGuard?.requestRead()
            guard let requestHead = head else { return }
            head = nil
            let requestBody = body ?? ByteBuffer()
            body = nil
            answering = true
            let keepAlive = requestHead.isKeepAlive
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            if client == nil { client = .some(RelayClient.of(context)) }
            endpoint.handle(
                method: requestHead.method.rawValue, path: requestHead.uri, headers: Self.headers(of: requestHead),
                body: requestBody, client: client ?? nil, on: context.eventLoop
            ) { answer in
                let (handler, context) = loopBound.value
                handler.write(answer, keepAlive: keepAlive, context: context)
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is RelayShed { return context.close(promise: nil) }
        guard event is RelayDrain else { return context.fireUserInboundEventTriggered(event) }
        draining = true
        if !answering { context.close(promise: nil) }
    }

    /// The request's headers as HTTP/2 would carry them: lower-case names.
    private static func headers(of head: HTTPRequestHead) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(head.headers.count)
        for (name, value) in head.headers { headers.add(name: name.lowercased(), value: value) }
        return headers
    }

    private func write(_ answer: RelayAnswer, keepAlive: Bool, context: ChannelHandlerContext) {
        let close = !keepAlive || draining
        var headers = HTTPHeaders()
        headers.reserveCapacity(answer.headers.count + 2)
        for (name, value, _) in answer.headers { headers.add(name: name, value: value) }
        headers.add(name: "content-length", value: String(answer.body?.readableBytes ?? 0))
        if close { headers.add(name: "connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: answer.status)
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        if let body = answer.body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        answering = false
        if close {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

/// Bounds the time an HTTP/1.1 request takes to arrive whole: from its first byte, its head and
/// body must be read within 10 s, so a client that sends its header lines or its body slowly
/// holds nothing longer. Sits before the HTTP decoder; `RelayHTTP1Handler` says when a request
/// is read. A connection idle between requests is the idle guard's.
final class RelayRequestGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    static var timeout: TimeAmount { .seconds(10) }
    private let budget: RelayBudget?
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(budget: RelayBudget?) { self.budget = budget }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if deadline == nil {
            let channel = context.channel
            let budget = budget
            deadline = context.eventLoop.scheduleTask(in: Self.timeout) {
                budget?.count("request_head")
                channel.close(promise: nil)
            }
        }
        context.fireChannelRead(data)
    }

    /// A request was read whole: the next one's time starts with its first byte.
    func requestRead() {
        deadline?.cancel()
        deadline = nil
    }
}
