import CHTTP2Shim
import Foundation
import Logging
import NIOCore
import NIOHPACK
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

/// Where a relay sends: host and port of an HTTPS server speaking HTTP/2.
public struct UpstreamEndpoint: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// The `:authority` sent.
    public var authority: String { port == 443 ? host : "\(host):\(port)" }

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// An `https://host[:port]` URL's endpoint (port 443 when none is given).
    public init?(url text: String) {
        guard let url = URL(string: text), url.scheme == "https", let host = url.host, !host.isEmpty,
            url.path.isEmpty || url.path == "/", url.query == nil
        else { return nil }
        self.init(host: host, port: url.port ?? 443)
    }
}

/// The HTTP/2 client of the relays, to Apple (`--apns-upstream`) or Google (`--fcm-upstream`):
/// per pool (a provider team for APNs, which accepts one team's tokens per connection) one
/// connection on each event loop, so that a push goes out on the thread its client's
/// connection is served on. Connections are kept and reused, their
/// streams multiplexed up to the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (SwiftNIO's HTTP/2
/// handler queues the rest). A connection that received `GOAWAY` or closed takes no new
/// streams; the next push opens a new one. A push the server refused unprocessed is sent once
/// more on a new connection.
final class HTTP2Upstream: Sendable {
    let endpoint: UpstreamEndpoint
    let timeout: Duration
    private let tls: NIOSSLContext
    /// A pool's connection on one event loop.
    private struct Slot: Hashable {
        var team: String
        var eventLoop: ObjectIdentifier
    }
    private let connections = Locked<[Slot: UpstreamConnection]>([:])
    private let backoff = ReconnectBackoff()
    private let logger: Logger

    /// `extraCA` is also trusted (`caSetting` names its flag in errors); `certificate` is
    /// presented as the TLS client certificate (an APNs certificate credential).
    init(
        endpoint: UpstreamEndpoint, timeout: Duration, extraCA: String?, caSetting: String, logger: Logger,
        certificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)? = nil
    ) throws(RelaySetupError) {
        self.endpoint = endpoint
        self.timeout = timeout
        self.logger = logger
        var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
        tlsConfiguration.applicationProtocols = ["h2"]
        tlsConfiguration.minimumTLSVersion = .tlsv12
        if let extraCA {
            tlsConfiguration.additionalTrustRoots = [.file(extraCA)]
        }
        if let certificate {
            tlsConfiguration.certificateChain = certificate.chain.map { .certificate($0) }
            tlsConfiguration.privateKey = .privateKey(certificate.key)
        }
        do { tls = try NIOSSLContext(configuration: tlsConfiguration) } catch {
            throw .unreadable(what: caSetting, path: extraCA ?? "", why: "\(error)")
        }
    }

    /// Open connections.
    var connectionCount: Int { connections.withLock { $0.count } }

    /// Sends `push` on `team`'s connection of `eventLoop`; a push refused unprocessed is sent once more.
    /// `reply` gets the answer or the failure, once, on `eventLoop`. While connecting fails, new
    /// connections wait out a backoff (see `ReconnectBackoff`) and pushes meanwhile fail at once.
    func send(_ push: UpstreamPush, team: String, on eventLoop: any EventLoop, reply: UpstreamReply) {
        if let failure = backoff.refusal(pool: team) { return reply.fail(failure) }
        connection(for: team, on: eventLoop).send(
            push,
            reply: UpstreamReply { result in
                if case let .failure(error) = result, case UpstreamFailure.notProcessed = error {
                    return self.connection(for: team, on: eventLoop).send(push, reply: reply)
                }
                reply.deliver(result)
            })
    }

    /// `team`'s open connection on `eventLoop`, or a new one.
    private func connection(for team: String, on eventLoop: any EventLoop) -> UpstreamConnection {
        let key = Slot(team: team, eventLoop: ObjectIdentifier(eventLoop))
        let (connection, opened) = connections.withLock { connections in
            if let connection = connections[key], connection.usable { return (connection, false) }
            let connection = UpstreamConnection(
                endpoint: endpoint, tls: tls, eventLoop: eventLoop, timeout: TimeAmount(timeout), logger: logger)
            connections[key] = connection
            return (connection, true)
        }
        // Outside the lock: a callback on a future already complete runs at once, and takes it.
        if opened {
            backoff.watch(connection, pool: team)
            connection.closed.whenComplete { [weak self, weak connection] _ in
                self?.connections.withLock { connections in
                    if let connection, connections[key] === connection { connections[key] = nil }
                }
            }
        }
        return connection
    }

    /// Closes every connection.
    func shutdown() -> EventLoopFuture<Void> {
        let all = connections.withLock { Array($0.values) }
        let group = MultiThreadedEventLoopGroup.singleton
        return EventLoopFuture.andAllComplete(all.map { $0.close() }, on: group.any())
    }
}

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
        logger: Logger
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
                        UpstreamConnectionHandler(authority: endpoint.authority, timeout: timeout) {
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

    /// Sends `push`; `reply` gets its answer on the connection's event loop.
    func send(_ push: UpstreamPush, reply: UpstreamReply) {
        if eventLoop.inEventLoop, let ready = state.withLock({ $0.handler }) {
            ready.value.send(push, reply: reply)
        } else {
            handler.whenComplete { result in
                switch result {
                case let .success(handler): handler.value.send(push, reply: reply)
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

/// The client side of one connection: opens a stream per push (libnghttp2 holds those past the
/// server's `SETTINGS_MAX_CONCURRENT_STREAMS` until a stream closes), matches the answers by
/// stream, fails pushes past the timeout, and fails the streams the server did not process
/// (`REFUSED_STREAM`, above a `GOAWAY`'s last stream) so that they are sent again. What is sent
/// in one turn of the event loop is written and flushed together.
final class UpstreamConnectionHandler: ChannelInboundHandler, HTTP2ConnectionHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let authority: String
    private let timeout: TimeAmount
    /// A connection silent this long is sent a `PING` (Apple's advice: an hour).
    private let idlePing: TimeAmount
    private var lastActivity = NIODeadline.now()
    private let goingAway: @Sendable () -> Void
    let session = HTTP2Session(clientBodyLimit: 64 * 1024)
    private var context: ChannelHandlerContext?
    private var pending: [Int32: UpstreamReply] = [:]
    /// Streams in the order sent, with their deadlines (ascending).
    private var deadlines = CircularBuffer<(Int32, NIODeadline)>()
    private var timer: RepeatedTask?
    private var closed = false
    private var closing = false

    init(
        authority: String, timeout: TimeAmount, idlePing: TimeAmount = .hours(1),
        goingAway: @escaping @Sendable () -> Void
    ) {
        self.authority = authority
        self.timeout = timeout
        self.idlePing = idlePing
        self.goingAway = goingAway
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

    /// Pushes given before the channel was active (the connect future completes first).
    private var waiting: [(UpstreamPush, UpstreamReply)] = []
    private var active = false

    func channelActive(context: ChannelHandlerContext) {
        active = true
        context.fireChannelActive()
        let waiting = waiting
        self.waiting = []
        for (push, reply) in waiting { send(push, reply: reply) }
        pump(context)
    }

    /// Opens a stream for `push`.
    func send(_ push: UpstreamPush, reply answer: UpstreamReply) {
        guard let context, !closed, !closing else { return answer.fail(UpstreamFailure.notProcessed) }
        guard active else { return waiting.append((push, answer)) }
        guard let id = session.request(authority: authority, path: push.path, headers: push.headers, body: push.body)
        else {
            // No stream ids left: this connection takes no more.
            goingAway()
            return answer.fail(UpstreamFailure.notProcessed)
        }
        pending[id] = answer
        lastActivity = context.eventLoop.now
        deadlines.append((id, context.eventLoop.now + timeout))
        pumpSoon(context)
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
        session.handleEvents { event in
            switch event.kind {
            case PM_H2_CLOSED:
                guard let answer = pending.removeValue(forKey: event.streamID) else { break }
                guard event.code == 0 else {
                    answer.fail(UpstreamFailure.reset("RST_STREAM, error code \(event.code)"))
                    break
                }
                complete(event.message(), answer)
            case PM_H2_REFUSED:
                fail(event.streamID, .notProcessed)
            case PM_H2_GOAWAY:
                goingAway()
            default:
                break
            }
        }
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
        for (_, answer) in waiting { answer.fail(UpstreamFailure.reset("connection closed")) }
        waiting = []
        failAll(UpstreamFailure.reset("connection closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        goingAway()
        context.close(promise: nil)
    }

    /// Headers whose value is new for each push (`apns-id`, `apns-unique-id`): not worth a place
    /// in the HPACK table of the client's connection.
    static func unique(_ name: String) -> Bool { name == "apns-id" || name == "apns-unique-id" }

    private func complete(_ message: HTTP2Message, _ answer: UpstreamReply) {
        guard let status = message.status, status >= 200 else {
            return answer.fail(UpstreamFailure.reset("no status"))
        }
        var headers = HPACKHeaders()
        headers.reserveCapacity(message.headers.count)
        for (name, value, _) in message.headers where name != "content-length" {
            headers.add(name: name, value: value, indexing: Self.unique(name) ? .nonIndexable : .indexable)
        }
        answer.succeed(
            UpstreamAnswer(
                status: status, headers: headers, body: message.body.readableBytes > 0 ? message.body : nil))
    }

    private func fail(_ id: Int32, _ error: UpstreamFailure) {
        pending.removeValue(forKey: id)?.fail(error)
    }

    private func failAll(_ error: UpstreamFailure) {
        let all = pending
        pending = [:]
        deadlines.removeAll()
        for (_, answer) in all { answer.fail(error) }
    }

    /// Fails the pushes past their deadline and gives up their streams; pings a connection
    /// silent for `idlePing`.
    private func expire() {
        guard let context else { return }
        let now = context.eventLoop.now
        if active, !closing, now - lastActivity >= idlePing {
            lastActivity = now
            session.ping()
            pumpSoon(context)
        }
        while let (id, deadline) = deadlines.first, deadline <= now || pending[id] == nil {
            deadlines.removeFirst()
            guard pending[id] != nil else { continue }
            fail(id, .timedOut)
            session.cancel(id)
            pumpSoon(context)
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) { self = .nanoseconds(duration.nanoseconds) }
}

extension String {
    /// Whether this is an IPv4 or IPv6 literal (no SNI is sent for those).
    var isIPAddress: Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, self, &v4) == 1 || inet_pton(AF_INET6, self, &v6) == 1
    }
}

/// Where a push's answer goes: called once, on the event loop of the connection it went out on.
/// A closure rather than a future: two fewer allocations and callback lists per push.
struct UpstreamReply: Sendable {
    let deliver: @Sendable (Result<UpstreamAnswer, any Error>) -> Void

    init(_ deliver: @escaping @Sendable (Result<UpstreamAnswer, any Error>) -> Void) { self.deliver = deliver }

    /// Completes `promise`.
    init(_ promise: EventLoopPromise<UpstreamAnswer>) { deliver = { promise.completeWith($0) } }

    func succeed(_ answer: UpstreamAnswer) { deliver(.success(answer)) }
    func fail(_ error: any Error) { deliver(.failure(error)) }
}
