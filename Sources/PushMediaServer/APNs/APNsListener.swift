import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushMedia
import ServiceLifecycle

/// The relay's listener: HTTP/2 only, over TLS (ALPN `h2` offered; a client that sends no ALPN
/// and starts with the HTTP/2 preface is served the same) or cleartext with prior knowledge (h2c).
/// On graceful shutdown it stops accepting, lets the pushes in flight finish, sends `GOAWAY` to
/// every client and closes.
public struct APNsRelayService: Service {
    let relay: APNsRelay
    let tls: NIOSSLContext?
    let onRunning: @Sendable (_ port: Int, _ tls: Bool) async -> Void

    /// Checks the settings, reads the certificates and keys, and prepares the upstream.
    public init(
        parts: ServerParts, logger: Logger, onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(RelaySetupError) {
        let config = parts.server.apns
        try config.validate()
        if !config.loopback && config.clientCA == nil && (config.ownKey || config.allowedTeams.isEmpty) {
            guard parts.server.insecureNoAuth else { throw .unrestricted(host: config.host, ownKey: config.ownKey) }
            logger.warning(
                "the APNs relay takes pushes from anyone (--insecure-no-auth)",
                metadata: ["address": "\(config.host)", "signs": "\(config.ownKey)"])
        }
        if let certificate = config.tlsCertificate, let key = config.tlsKey {
            let configuration = try serverTLS(
                certificate: certificate, key: key, clientCA: config.clientCA, protocols: ["h2"],
                what: "--apns-tls-cert/--apns-tls-key")
            do { tls = try NIOSSLContext(configuration: configuration) } catch {
                throw .unreadable(what: "--apns-tls-cert/--apns-tls-key", path: certificate, why: "\(error)")
            }
        } else {
            tls = nil
        }
        let signer = try config.key.map { key throws(RelaySetupError) in
            try ProviderTokenSigner(keyFile: key, keyID: config.keyID ?? "", teamID: config.teamID ?? "")
        }
        let upstream = try HTTP2Upstream(
            endpoint: config.upstreamEndpoint, timeout: config.upstreamTimeout, extraCA: config.upstreamCA,
            caSetting: "--apns-upstream-ca", logger: logger)
        relay = APNsRelay(config: config, parts: parts, upstream: upstream, signer: signer, logger: logger)
        parts.metrics.apnsConnections.withLock { $0 = { upstream.connectionCount } }
        self.onRunning = onRunning
    }

    public func run() async throws {
        let config = relay.config
        let relay = relay
        let tls = tls
        let clients = Locked<[ObjectIdentifier: any Channel]>([:])
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls { try sync.addHandler(NIOSSLServerHandler(context: tls)) }
                    var connection = NIOHTTP2Handler.ConnectionConfiguration()
                    connection.initialSettings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: 1 << 16),
                    ]
                    try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connection))
                    try sync.addHandler(APNsConnectionHandler(relay: relay))
                    let id = ObjectIdentifier(channel)
                    clients.withLock { $0[id] = channel }
                    channel.closeFuture.whenComplete { _ in _ = clients.withLock { $0.removeValue(forKey: id) } }
                }
            }
            .bind(host: config.host, port: config.port ?? 0).get()
        await onRunning(server.localAddress?.port ?? config.port ?? 0, tls != nil)
        try? await gracefulShutdown()
        try? await server.close()
        // Each connection gets GOAWAY once its pushes in flight are answered, and closes (some
        // clients, those on Python's h2 among them, drop answers that come after a GOAWAY).
        for channel in clients.withLock({ Array($0.values) }) {
            channel.pipeline.fireUserInboundEventTriggered(APNsConnectionHandler.Drain())
        }
        let limit = ContinuousClock.now + config.budget + config.upstreamTimeout + .seconds(1)
        while !clients.withLock({ $0.isEmpty }) && ContinuousClock.now < limit {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in clients.withLock({ Array($0.values) }) {
            try? await channel.close()
        }
        try? await relay.upstream.shutdown().get()
    }
}

/// The server side of one client connection, on its frames: collects each stream's request (a
/// body past 64 KiB is answered 413 at once), hands it to the relay and writes the answer on the
/// same stream. Writes made in one turn of the event loop are flushed together.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Request {
        var headers: HPACKHeaders
        var body: ByteBuffer?
    }

    private let relay: APNsRelay
    private var requests: [HTTP2StreamID: Request] = [:]
    /// Streams answered before their request ended (413): the rest of their frames is ignored.
    private var answeredEarly: Set<HTTP2StreamID> = []
    private let flow = ConnectionFlow()
    private static let bodyLimit = 64 * 1024
    /// Streams handed to the relay and not yet answered.
    private var answering = 0
    private var lastStreamID = HTTP2StreamID(0)
    private var draining = false
    private var wentAway = false

    /// Asks the connection to close once its pushes in flight are answered, with `GOAWAY`.
    struct Drain {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is Drain {
            draining = true
            if answering == 0 { goAway(context: context) }
            return
        }
        if let closed = event as? StreamClosedEvent {
            // A stream reset before its request ended.
            requests[closed.streamID] = nil
            answeredEarly.remove(closed.streamID)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func goAway(context: ChannelHandlerContext) {
        guard !wentAway else { return }
        wentAway = true
        let frame = HTTP2Frame(
            streamID: .rootStream, payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: nil))
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in channel.close(promise: nil) }
    }

    init(relay: APNsRelay) { self.relay = relay }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        flow.open(context)
        switch frame.payload {
        case let .headers(headers):
            guard !answeredEarly.contains(id) else {
                if headers.endStream { answeredEarly.remove(id) }
                return
            }
            if requests[id] == nil { requests[id] = Request(headers: headers.headers) }
            if headers.endStream { dispatch(id, context: context) }
        case let .data(data):
            flow.received(data)
            if case var .byteBuffer(buffer) = data.data {
                if requests[id] != nil, buffer.readableBytes > 0 {
                    if requests[id]!.body == nil {
                        requests[id]!.body = buffer
                    } else {
                        requests[id]!.body!.writeBuffer(&buffer)
                    }
                }
            }
            if let request = requests[id], (request.body?.readableBytes ?? 0) > Self.bodyLimit {
                requests[id] = nil
                if !data.endStream { answeredEarly.insert(id) }
                write(
                    APNsRelay.refusal(413, "PayloadTooLarge", apnsID: request.headers.first(name: "apns-id")), on: id,
                    context: context)
            } else if data.endStream {
                if answeredEarly.remove(id) == nil { dispatch(id, context: context) }
            }
        case .rstStream:
            requests[id] = nil
            answeredEarly.remove(id)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flow.readComplete(context)
        context.fireChannelReadComplete()
    }

    private func dispatch(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let request = requests.removeValue(forKey: id) else { return }
        answering += 1
        lastStreamID = max(lastStreamID, id)
        var headers = HPACKHeaders()
        headers.reserveCapacity(request.headers.count)
        var method = ""
        var path = ""
        for (name, value, indexing) in request.headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            default: if !name.hasPrefix(":") { headers.add(name: name, value: value, indexing: indexing) }
            }
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        relay.handle(
            method: method, path: path, headers: headers, body: request.body ?? ByteBuffer(), on: context.eventLoop
        ).whenComplete { result in
            let (handler, context) = loopBound.value
            switch result {
            case let .success(answer): handler.write(answer, on: id, context: context)
            case .failure:
                handler.write(APNsRelay.refusal(500, "InternalServerError", apnsID: nil), on: id, context: context)
            }
            handler.answering -= 1
            if handler.draining && handler.answering == 0 { handler.goAway(context: context) }
        }
    }

    private func write(_ answer: APNsAnswer, on id: HTTP2StreamID, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(answer.headers.count + 2)
        headers.add(name: ":status", value: String(answer.status))
        headers.add(contentsOf: answer.headers)
        let body = answer.body.flatMap { $0.readableBytes > 0 ? $0 : nil }
        if let body { headers.add(name: "content-length", value: String(body.readableBytes)) }
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: body == nil)))),
            promise: nil)
        if let body {
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
                promise: nil)
        }
        flow.flushSoon(context)
    }

    /// A protocol error (SwiftNIO has reset the stream, or sent `GOAWAY` for the connection): the
    /// connection closes once the pushes in flight on it are answered.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !draining else { return }
        draining = true
        if answering == 0 { goAway(context: context) }
    }
}
