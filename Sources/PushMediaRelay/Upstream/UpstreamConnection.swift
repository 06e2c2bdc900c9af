import CHTTP2Shim
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import PushMedia

/// One HTTP/2 connection to the upstream, served on one event loop.
final class UpstreamConnection: Sendable {
    let eventLoop: any EventLoop
    /// The connection's handler once TCP is connected (TLS completes as the first push is written).
    private let handler: EventLoopFuture<NIOLoopBound<UpstreamConnectionHandler>>
    /// Completes when the connection closed or never opened.
    let closed: EventLoopFuture<Void>
    private let state = Locked(
        (
            goingAway: false, closed: false, channel: Channel?.none,
            handler: NIOLoopBound<UpstreamConnectionHandler>?.none
        ))

    init(
        endpoint: UpstreamEndpoint, tls: NIOSSLContext, eventLoop: any EventLoop, timeout: TimeAmount,
        limits: RelayLimits, logger: Logger
    ) {
        self.eventLoop = eventLoop
        let closedPromise = eventLoop.makePromise(of: Void.self)
        closed = closedPromise.futureResult
        let state = state
        closed.whenComplete { _ in state.withLock { $0.closed = true } }
        let connected = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(
                        NIOSSLClientHandler(
                            context: tls, serverHostname: endpoint.host.isIPAddress ? nil : endpoint.host))
                    try sync.addHandler(
                        UpstreamConnectionHandler(authority: endpoint.authority, timeout: timeout, limits: limits) {
                            state.withLock { $0.goingAway = true }
                        })
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
        connected.whenComplete { result in
            switch result {
            case let .success(channel):
                state.withLock { $0.channel = channel }
                channel.closeFuture.cascade(to: closedPromise)
            case let .failure(error):
                logger.warning(
                    "upstream unreachable", metadata: ["upstream": "\(endpoint.authority)", "error": "\(error)"])
                closedPromise.succeed()
            }
        }
        handler =
            connected
            .flatMapErrorThrowing { error in throw UpstreamFailure.unreachable("\(endpoint.authority): \(error)") }
            .flatMapThrowing { channel in
                let handler = NIOLoopBound(
                    try channel.pipeline.syncOperations.handler(type: UpstreamConnectionHandler.self),
                    eventLoop: channel.eventLoop)
                state.withLock { $0.handler = handler }
                return handler
            }
    }

    /// Completes with whether TCP connected.
    var connected: EventLoopFuture<Bool> { handler.map { _ in true }.recover { _ in false } }

    /// Takes new streams: connected or connecting, no `GOAWAY` received, not closed.
    var usable: Bool { state.withLock { !$0.goingAway && !$0.closed } }

    /// Sends `push` in its turn under `queue`; `reply` gets its answer on the connection's event loop.
    func send(_ push: UpstreamPush, queue: QueueKey, reply: UpstreamReply) {
        if eventLoop.inEventLoop, let ready = state.withLock({ $0.handler }) {
            ready.value.send(push, queue: queue, reply: reply)
        } else {
            handler.whenComplete { result in
                switch result {
                case let .success(handler): handler.value.send(push, queue: queue, reply: reply)
                case let .failure(error): reply.fail(error)
                }
            }
        }
    }

    func close() -> EventLoopFuture<Void> {
        guard let channel = state.withLock({ $0.channel }) else { return closed }
        return channel.close().flatMapError { _ in self.eventLoop.makeSucceededVoidFuture() }
    }
}

/// A push waiting for its stream, or on it: its reply is given once (an answer, a failure, or
/// the timeout, whichever comes first).
final class UpstreamStream {
    let push: UpstreamPush
    let reply: UpstreamReply
    let deadline: NIODeadline
    /// Its stream once sent.
    var id: Int32?
    var answered = false

    init(push: UpstreamPush, reply: UpstreamReply, deadline: NIODeadline) {
        self.push = push
        self.reply = reply
        self.deadline = deadline
    }

    /// Gives the reply, unless it was given.
    func finish(_ result: Result<UpstreamAnswer, any Error>) {
        guard !answered else { return }
        answered = true
        reply.deliver(result)
    }
}

/// The client side of one connection: a push waits in the connection's `FairQueue` until a
/// stream is free (the server's `SETTINGS_MAX_CONCURRENT_STREAMS`), then goes out on a stream of
/// its own; answers are matched by stream, pushes past the timeout fail (sent or not), and the
/// pushes the server did not process (`REFUSED_STREAM`, above a `GOAWAY`'s last stream, or still
/// waiting when it went away) fail so that they are sent again. What is sent in one turn of the
/// event loop is written and flushed together.
final class UpstreamConnectionHandler: ChannelInboundHandler, HTTP2ConnectionHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let authority: String
    private let timeout: TimeAmount
    /// A connection silent this long is sent a `PING` (Apple's advice: an hour).
    private let idlePing: TimeAmount
    private var lastActivity = NIODeadline.now()
    private let goingAway: @Sendable () -> Void
    let session: HTTP2Session
    private var context: ChannelHandlerContext?
    /// Pushes waiting for a stream, in their apps' fair turns.
    private var waiting: FairQueue<UpstreamStream>
    /// Pushes on their streams.
    private var pending: [Int32: UpstreamStream] = [:]
    /// Every push not yet answered, in the order given (so by deadline).
    private var deadlines = CircularBuffer<UpstreamStream>()
    private var timer: RepeatedTask?
    private var active = false
    private var closed = false
    private var closing = false
    /// The server said `GOAWAY`: no new streams.
    private var refusing = false

    init(
        authority: String, timeout: TimeAmount, limits: RelayLimits, goingAway: @escaping @Sendable () -> Void
    ) {
        self.authority = authority
        self.timeout = timeout
        idlePing = TimeAmount(limits.upstreamPing)
        self.goingAway = goingAway
        session = HTTP2Session(client: limits.client)
        waiting = FairQueue(quantum: limits.fairQuantum)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        lastActivity = context.eventLoop.now
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) {
            _ in loopBound.value.expire()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        failAll(UpstreamFailure.reset("connection closed"))
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        active = true
        context.fireChannelActive()
        dispatch()
        pump(context)
    }

    /// Queues `push` under `queue`; it goes out once a stream is free and its turn comes (at
    /// once when one is free and no push waits: the queue's turn is then its own).
    func send(_ push: UpstreamPush, queue: QueueKey, reply: UpstreamReply) {
        guard let context, !closed, !closing, !refusing else { return reply.fail(UpstreamFailure.notProcessed) }
        let now = context.eventLoop.now
        let stream = UpstreamStream(push: push, reply: reply, deadline: now + timeout)
        deadlines.append(stream)
        lastActivity = now
        if active, waiting.isEmpty, pending.count < session.peerMaxStreams {
            if open(stream) { pumpSoon(context) }
            return
        }
        // A push costs 1 and 1 more per KiB: a turn's quantum (`--relay-fair-quantum`, 4) sends about 4
        // ordinary pushes.
        waiting.push(stream, key: queue, cost: 1 + push.body.readableBytes / 1024)
        dispatch()
    }

    /// Opens streams for the waiting pushes while the server allows more.
    private func dispatch() {
        guard active, !refusing, let context else { return }
        var opened = false
        while !refusing, pending.count < session.peerMaxStreams, let stream = waiting.pop() {
            guard !stream.answered else { continue }
            opened = open(stream) || opened
        }
        if opened { pumpSoon(context) }
    }

    /// Opens `stream`'s HTTP/2 stream; false when the connection has no stream ids left (the
    /// push and those waiting then fail unprocessed, to go on a new connection).
    private func open(_ stream: UpstreamStream) -> Bool {
        let push = stream.push
        guard let id = session.request(authority: authority, path: push.path, headers: push.headers, body: push.body)
        else {
            goingAway()
            refusing = true
            stream.finish(.failure(UpstreamFailure.notProcessed))
            failWaiting(UpstreamFailure.notProcessed)
            return false
        }
        stream.id = id
        pending[id] = stream
        stream.reply.opened()
        return true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastActivity = context.eventLoop.now
        receive(unwrapInboundIn(data), context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump(context) }
        context.fireChannelWritabilityChanged()
    }

    func handleEvents(_ context: ChannelHandlerContext) {
        var freed = false
        session.handleEvents { event in
            switch event.kind {
            case PM_H2_CLOSED:
                guard let stream = pending.removeValue(forKey: event.streamID) else { break }
                freed = true
                guard event.code == 0 else {
                    let code = HTTP2ErrorCode(rawValue: event.code).map { "\($0)" } ?? "error code \(event.code)"
                    stream.finish(.failure(UpstreamFailure.reset("RST_STREAM \(code)")))
                    break
                }
                complete(session.message(event), stream)
            case PM_H2_REFUSED:
                freed = true
                pending.removeValue(forKey: event.streamID)?.finish(.failure(UpstreamFailure.notProcessed))
            case PM_H2_GOAWAY:
                goingAway()
                refusing = true
                failWaiting(UpstreamFailure.notProcessed)
            case PM_H2_SETTINGS:
                freed = true
            default:
                break
            }
        }
        if freed { dispatch() }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        pump(context)
        context.fireChannelReadComplete()
    }

    /// Closes the connection once libnghttp2 is done with it: a protocol error, or the server's
    /// `GOAWAY` with no stream left open.
    func pumped(_ context: ChannelHandlerContext) {
        guard !closing, !session.alive else { return }
        closing = true
        goingAway()
        closeAfterWrites(context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        goingAway()
        failAll(UpstreamFailure.reset("connection closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        goingAway()
        context.close(promise: nil)
    }

    private func complete(_ message: HTTP2Message, _ stream: UpstreamStream) {
        guard let status = message.status, status >= 200 else {
            return stream.finish(.failure(UpstreamFailure.reset("no status")))
        }
        stream.finish(
            .success(
                UpstreamAnswer(
                    status: status, headers: message.headers,
                    body: message.body.readableBytes > 0 ? message.body : nil)))
    }

    /// Fails the pushes still waiting for a stream (they were never sent: safe to send again).
    private func failWaiting(_ error: UpstreamFailure) {
        while let stream = waiting.pop() { stream.finish(.failure(error)) }
    }

    private func failAll(_ error: UpstreamFailure) {
        // Those never sent, first: they go again elsewhere.
        failWaiting(.notProcessed)
        let all = pending
        pending = [:]
        deadlines.removeAll()
        for (_, stream) in all { stream.finish(.failure(error)) }
    }

    /// Fails the pushes past their deadline (giving up the streams of those sent); pings a
    /// connection silent for `idlePing`.
    private func expire() {
        guard let context else { return }
        let now = context.eventLoop.now
        if active, !closing, now - lastActivity >= idlePing {
            lastActivity = now
            session.ping()
            pumpSoon(context)
        }
        while let first = deadlines.first, first.deadline <= now || first.answered {
            deadlines.removeFirst()
            guard !first.answered else { continue }
            first.finish(.failure(UpstreamFailure.timedOut))
            if let id = first.id, pending.removeValue(forKey: id) != nil {
                session.reset(id, .cancel)
                pumpSoon(context)
            }
        }
        dispatch()
    }
}
