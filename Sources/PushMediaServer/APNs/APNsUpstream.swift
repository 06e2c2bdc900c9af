import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushMedia

/// A push on its way to Apple: the path, the headers to send (no pseudo-headers) and the body.
struct UpstreamPush: Sendable {
    var path: String
    var headers: HPACKHeaders
    var body: ByteBuffer
}

/// Apple's answer: status, headers (no pseudo-headers) and body.
struct UpstreamAnswer: Sendable {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer?
}

/// Why a push got no answer from the upstream.
enum UpstreamFailure: Error, CustomStringConvertible {
    /// Connecting or TLS failed.
    case unreachable(String)
    /// No answer within the timeout.
    case timedOut
    /// Refused unprocessed (`GOAWAY` below its stream, or `REFUSED_STREAM`): safe to send again.
    case notProcessed
    /// The stream or connection ended without an answer.
    case reset(String)

    var description: String {
        switch self {
        case let .unreachable(why): "upstream unreachable: \(why)"
        case .timedOut: "no answer from the upstream in time"
        case .notProcessed: "the upstream did not process the push"
        case let .reset(why): "the upstream ended the stream: \(why)"
        }
    }
}

/// The HTTP/2 client to Apple (or `--apns-upstream`): one connection per provider team (Apple
/// accepts one team's tokens per connection), kept and reused, its streams multiplexed up to
/// the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (SwiftNIO's HTTP/2 handler queues the rest).
/// A connection that received `GOAWAY` or closed takes no new streams; the next push opens a
/// new one. Streams the server refused unprocessed are sent once more on a new connection.
final class APNsUpstream: Sendable {
    let endpoint: APNsRelayConfig.Upstream
    let timeout: Duration
    private let tls: NIOSSLContext
    private let group: any EventLoopGroup
    private let connections = Locked<[String: UpstreamConnection]>([:])
    private let logger: Logger

    init(config: APNsRelayConfig, group: any EventLoopGroup, logger: Logger) throws(APNsSetupError) {
        endpoint = config.upstreamEndpoint
        timeout = config.upstreamTimeout
        self.group = group
        self.logger = logger
        var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
        tlsConfiguration.applicationProtocols = ["h2"]
        tlsConfiguration.minimumTLSVersion = .tlsv12
        if let ca = config.upstreamCA {
            tlsConfiguration.additionalTrustRoots = [.file(ca)]
        }
        do { tls = try NIOSSLContext(configuration: tlsConfiguration) } catch {
            throw .unreadable(what: "--apns-upstream-ca", path: config.upstreamCA ?? "", why: "\(error)")
        }
    }

    /// Open connections.
    var connectionCount: Int { connections.withLock { $0.count } }

    /// Sends `push` on `team`'s connection; a push refused unprocessed is sent once more.
    func send(_ push: UpstreamPush, team: String) -> EventLoopFuture<UpstreamAnswer> {
        attempt(push, team: team).flatMapError { error in
            guard case UpstreamFailure.notProcessed = error else {
                return self.group.any().makeFailedFuture(error)
            }
            return self.attempt(push, team: team)
        }
    }

    private func attempt(_ push: UpstreamPush, team: String) -> EventLoopFuture<UpstreamAnswer> {
        let connection = connection(for: team)
        let timeout = TimeAmount(timeout)
        return connection.multiplexer.flatMap { multiplexer in
            let promise = connection.eventLoop.makePromise(of: UpstreamAnswer.self)
            multiplexer.createStreamChannel(promise: nil) { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(
                        UpstreamStreamHandler(
                            push: push, authority: self.endpoint.authority, answer: promise, timeout: timeout))
                }
            }
            return promise.futureResult
        }
    }

    /// `team`'s open connection, or a new one.
    private func connection(for team: String) -> UpstreamConnection {
        connections.withLock { connections in
            if let connection = connections[team], connection.usable { return connection }
            let connection = UpstreamConnection(
                endpoint: endpoint, tls: tls, eventLoop: group.next(), connectTimeout: TimeAmount(timeout),
                logger: logger)
            connections[team] = connection
            connection.closed.whenComplete { [weak self, weak connection] _ in
                self?.connections.withLock { connections in
                    if let connection, connections[team] === connection { connections[team] = nil }
                }
            }
            return connection
        }
    }

    /// Closes every connection.
    func shutdown() -> EventLoopFuture<Void> {
        let all = connections.withLock { Array($0.values) }
        let closes = all.map { $0.close() }
        return EventLoopFuture.andAllComplete(closes, on: group.any())
    }
}

/// One HTTP/2 connection to the upstream.
final class UpstreamConnection: Sendable {
    let eventLoop: any EventLoop
    /// The stream multiplexer once TCP is connected (TLS completes as the first stream is written).
    let multiplexer: EventLoopFuture<NIOHTTP2Handler.StreamMultiplexer>
    /// Completes when the connection closed or never opened.
    let closed: EventLoopFuture<Void>
    private let state = Locked((goingAway: false, closed: false, channel: Channel?.none))

    init(
        endpoint: APNsRelayConfig.Upstream, tls: NIOSSLContext, eventLoop: any EventLoop, connectTimeout: TimeAmount,
        logger: Logger
    ) {
        self.eventLoop = eventLoop
        let closedPromise = eventLoop.makePromise(of: Void.self)
        closed = closedPromise.futureResult
        let state = state
        closed.whenComplete { _ in state.withLock { $0.closed = true } }
        let connected = ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(
                        NIOSSLClientHandler(
                            context: tls, serverHostname: endpoint.host.isIPAddress ? nil : endpoint.host))
                    var connection = NIOHTTP2Handler.ConnectionConfiguration()
                    connection.initialSettings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
                        HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: 1 << 16),
                        HTTP2Setting(parameter: .enablePush, value: 0),
                    ]
                    _ = try sync.configureHTTP2Pipeline(
                        mode: .client, connectionConfiguration: connection,
                        streamConfiguration: NIOHTTP2Handler.StreamConfiguration()
                    ) { stream in stream.close() }  // no server push
                    try sync.addHandler(GoAwayWatcher { state.withLock { $0.goingAway = true } })
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
                    "apns upstream unreachable", metadata: ["upstream": "\(endpoint.authority)", "error": "\(error)"])
                closedPromise.succeed()
            }
        }
        multiplexer =
            connected
            .flatMapErrorThrowing { error in throw UpstreamFailure.unreachable("\(endpoint.authority): \(error)") }
            .flatMap { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.handler(type: NIOHTTP2Handler.self).syncMultiplexer()
                }
            }
    }

    /// Takes new streams: connected or connecting, no `GOAWAY` received, not closed.
    var usable: Bool { state.withLock { !$0.goingAway && !$0.closed } }

    func close() -> EventLoopFuture<Void> {
        guard let channel = state.withLock({ $0.channel }) else { return closed }
        return channel.close().flatMapError { _ in self.eventLoop.makeSucceededVoidFuture() }
    }
}

/// Marks the connection as going away when the server sends `GOAWAY`.
final class GoAwayWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    let goingAway: @Sendable () -> Void

    init(goingAway: @escaping @Sendable () -> Void) { self.goingAway = goingAway }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .goAway = unwrapInboundIn(data).payload { goingAway() }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        goingAway()
        context.close(promise: nil)
    }
}

/// One push on one stream: writes the request, collects the answer, fails on timeout or reset.
final class UpstreamStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let push: UpstreamPush
    private let authority: String
    private let answer: EventLoopPromise<UpstreamAnswer>
    private let timeout: TimeAmount
    private var status: Int?
    private var headers = HPACKHeaders()
    private var body: ByteBuffer?
    private var done = false
    private var refused = false
    private var timer: Scheduled<Void>?

    init(push: UpstreamPush, authority: String, answer: EventLoopPromise<UpstreamAnswer>, timeout: TimeAmount) {
        self.push = push
        self.authority = authority
        self.answer = answer
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = loopBound.value
            handler.finish(.failure(UpstreamFailure.timedOut))
            context.close(promise: nil)
        }
        if context.channel.isActive { sendRequest(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendRequest(context: context)
        context.fireChannelActive()
    }

    private var sent = false

    private func sendRequest(context: ChannelHandlerContext) {
        guard !sent else { return }
        sent = true
        var headers = HPACKHeaders()
        headers.reserveCapacity(push.headers.count + 5)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: authority)
        headers.add(name: ":path", value: push.path)
        headers.add(contentsOf: push.headers)
        headers.add(name: "content-length", value: String(push.body.readableBytes))
        let empty = push.body.readableBytes == 0
        context.write(
            wrapOutboundOut(.headers(.init(headers: headers, endStream: empty))), promise: nil)
        if !empty {
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(push.body), endStream: true))), promise: nil)
        }
        context.flush()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .headers(frame):
            if status == nil, let text = frame.headers.first(name: ":status"), let code = Int(text) {
                if code >= 200 {
                    status = code
                    for (name, value, _) in frame.headers where !name.hasPrefix(":") && name != "content-length" {
                        headers.add(name: name, value: value)
                    }
                }
            }
            if frame.endStream { complete() }
        case let .data(frame):
            if case var .byteBuffer(buffer) = frame.data, buffer.readableBytes > 0 {
                if body == nil {
                    body = buffer
                } else if body!.readableBytes + buffer.readableBytes <= 64 * 1024 {
                    body!.writeBuffer(&buffer)
                }
            }
            if frame.endStream { complete() }
        case let .rstStream(code):
            if code == .refusedStream { refused = true }
        default:
            break
        }
    }

    private func complete() {
        guard let status else { return finish(.failure(UpstreamFailure.reset("no status"))) }
        finish(.success(UpstreamAnswer(status: status, headers: headers, body: body)))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, closed.reason == .refusedStream { refused = true }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(refused || !sent ? UpstreamFailure.notProcessed : UpstreamFailure.reset("stream closed")))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish(.failure(refused || !sent ? UpstreamFailure.notProcessed : UpstreamFailure.reset("stream closed")))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOHTTP2Errors.StreamClosed, error.errorCode == .refusedStream { refused = true }
        finish(.failure(refused ? UpstreamFailure.notProcessed : UpstreamFailure.reset("\(error)")))
        context.close(promise: nil)
    }

    private func finish(_ result: Result<UpstreamAnswer, any Error>) {
        guard !done else { return }
        done = true
        timer?.cancel()
        answer.completeWith(result)
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension String {
    /// Whether this is an IPv4 or IPv6 literal (no SNI is sent for those).
    var isIPAddress: Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, self, &v4) == 1 || inet_pton(AF_INET6, self, &v6) == 1
    }
}
