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
        onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) async throws {
        try await RelayListener(
            endpoint: self, host: host, port: port, tls: tls, http1: http1, drainLimit: drainLimit
        ).run { port in await onRunning(port, tls != nil) }
        try? await upstream.shutdown().get()
    }

    /// Sends `push` on `pool`'s connection of `eventLoop`; `done` gets the upstream's answer (or
    /// `unavailable`'s, when it gave none) with `x-pushmedia-outcome: outcome` added, and the
    /// time the upstream took.
    func forward(
        _ push: UpstreamPush, pool: String, outcome: String, on eventLoop: any EventLoop,
        unavailable: @escaping @Sendable (any Error) -> RelayAnswer,
        done: @escaping @Sendable (RelayAnswer, _ upstreamTime: Duration) -> Void
    ) {
        let sent = ContinuousClock.now
        let reply = UpstreamReply { result in
            var answer: RelayAnswer
            switch result {
            case let .success(upstream):
                answer = RelayAnswer(status: upstream.status, headers: upstream.headers, body: upstream.body)
            case let .failure(error):
                answer = unavailable(error)
            }
            answer.headers.add(name: "x-pushmedia-outcome", value: outcome)
            done(answer, ContinuousClock.now - sent)
        }
        upstream.send(push, team: pool, on: eventLoop, reply: reply)
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

    /// Serves until graceful shutdown; `onRunning` gets the bound port.
    func run(onRunning: @Sendable (_ port: Int) async -> Void) async throws {
        let endpoint = endpoint
        let tls = tls
        let http1 = http1
        let clients = Locked<[ObjectIdentifier: any Channel]>([:])
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(RelayIdleGuard())
                    if let tls { try sync.addHandler(NIOSSLServerHandler(context: tls)) }
                    if http1 {
                        try sync.addHandler(RelayProtocolSniffer(endpoint: endpoint))
                    } else {
                        try Self.serveHTTP2(sync, endpoint: endpoint)
                    }
                    let id = ObjectIdentifier(channel)
                    clients.withLock { $0[id] = channel }
                    channel.closeFuture.whenComplete { _ in _ = clients.withLock { $0.removeValue(forKey: id) } }
                }
            }
            .bind(host: host, port: port ?? 0).get()
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

    static func serveHTTP2(_ sync: ChannelPipeline.SynchronousOperations, endpoint: Endpoint) throws {
        try sync.addHandler(RelayHTTP2Handler(endpoint: endpoint))
    }

    static func serveHTTP1(_ sync: ChannelPipeline.SynchronousOperations, endpoint: Endpoint) throws {
        try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
        try sync.addHandler(RelayHTTP1Handler(endpoint: endpoint))
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
    private var buffered: ByteBuffer?

    init(endpoint: Endpoint) { self.endpoint = endpoint }

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
                try RelayListener.serveHTTP2(sync, endpoint: endpoint)
            } else {
                try RelayListener.serveHTTP1(sync, endpoint: endpoint)
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
        // Shutdown before a request began: nothing to finish.
        if event is RelayDrain { context.close(promise: nil) } else { context.fireUserInboundEventTriggered(event) }
    }
}

/// The server side of one HTTP/2 client connection: libnghttp2 collects each stream's request (a
/// body past the endpoint's limit is answered at once), the endpoint answers it, and the answer
/// goes out on the same stream. What is answered in one turn of the event loop is written and
/// flushed together.
final class RelayHTTP2Handler<Endpoint: RelayEndpoint>: ChannelInboundHandler, HTTP2ConnectionHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let endpoint: Endpoint
    let session: HTTP2Session
    /// Streams handed to the endpoint and not yet answered. Also those the client reset: their
    /// work goes on, so past `maxStreams` new ones are refused (a client resetting streams as
    /// fast as it opens them gets no more work done than one that waits).
    private var answering = 0
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, and the most requests in the endpoint's hands at once.
    static var maxStreams: Int { 128 }
    private var draining = false
    private var closing = false
    /// The client's certificate identity, read at its first request.
    private var client: RelayClient??

    init(endpoint: Endpoint) {
        self.endpoint = endpoint
        session = HTTP2Session(serverBodyLimit: endpoint.bodyLimit, maxStreams: UInt32(Self.maxStreams))
    }

    /// The server's SETTINGS go first (buffered by TLS until its handshake is done).
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { pump(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        pump(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        receive(unwrapInboundIn(data), context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump(context) }
        context.fireChannelWritabilityChanged()
    }

    func handleEvents(_ context: ChannelHandlerContext) {
        while let event = session.nextEvent() {
            guard let stream = event.stream else { continue }
            switch event.kind {
            case PM_H2_REQUEST where answering >= Self.maxStreams:
                session.release(stream)
                session.refuse(event.stream_id)
            case PM_H2_REQUEST:
                dispatch(event.stream_id, session.take(stream), context: context)
            case PM_H2_TOO_LARGE:
                let request = session.take(stream)
                respond(endpoint.tooLarge(headers: request.headers), on: event.stream_id)
            default:
                session.release(stream)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        pump(context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
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

    private func dispatch(_ id: Int32, _ request: HTTP2Message, context: ChannelHandlerContext) {
        answering += 1
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        if client == nil { client = .some(RelayClient.of(context)) }
        endpoint.handle(
            method: request.method, path: request.path, headers: request.headers, body: request.body,
            client: client ?? nil, on: context.eventLoop
        ) { answer in
            let (handler, context) = loopBound.value
            handler.respond(answer, on: id)
            handler.answering -= 1
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
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var answering = false
    private var draining = false
    /// The client's certificate identity, read at its first request.
    private var client: RelayClient??

    init(endpoint: Endpoint) { self.endpoint = endpoint }

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
