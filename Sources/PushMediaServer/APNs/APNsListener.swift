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
/// On graceful shutdown it stops accepting, sends `GOAWAY` to every client, lets the pushes in
/// flight finish and closes.
public struct APNsRelayService: Service {
    let relay: APNsRelay
    let tls: NIOSSLContext?
    let onRunning: @Sendable (_ port: Int, _ tls: Bool) async -> Void

    /// Checks the settings, reads the certificates and keys, and prepares the upstream.
    public init(
        parts: ServerParts, logger: Logger, onRunning: @escaping @Sendable (_ port: Int, _ tls: Bool) async -> Void
    ) throws(APNsSetupError) {
        let config = parts.server.apns
        try config.validate()
        if !config.loopback && config.clientCA == nil && (config.ownKey || config.allowedTeams.isEmpty) {
            guard parts.server.insecureNoAuth else { throw .unrestricted(host: config.host, ownKey: config.ownKey) }
            logger.warning(
                "the APNs relay takes pushes from anyone (--insecure-no-auth)",
                metadata: ["address": "\(config.host)", "signs": "\(config.ownKey)"])
        }
        if let certificate = config.tlsCertificate, let key = config.tlsKey {
            var tlsConfiguration: TLSConfiguration
            do {
                tlsConfiguration = TLSConfiguration.makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            } catch {
                throw .unreadable(what: "--apns-tls-cert/--apns-tls-key", path: certificate, why: "\(error)")
            }
            tlsConfiguration.applicationProtocols = ["h2"]
            tlsConfiguration.minimumTLSVersion = .tlsv12
            if let clientCA = config.clientCA {
                tlsConfiguration.trustRoots = .file(clientCA)
                tlsConfiguration.certificateVerification = .noHostnameVerification
            }
            do { tls = try NIOSSLContext(configuration: tlsConfiguration) } catch {
                throw .unreadable(what: "--apns-tls-cert/--apns-tls-key", path: certificate, why: "\(error)")
            }
        } else {
            tls = nil
        }
        let signer = try config.key.map { key throws(APNsSetupError) in
            try ProviderTokenSigner(keyFile: key, keyID: config.keyID ?? "", teamID: config.teamID ?? "")
        }
        let upstream = try APNsUpstream(config: config, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
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
                    _ = try sync.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: connection,
                        streamConfiguration: NIOHTTP2Handler.StreamConfiguration()
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(APNsStreamHandler(relay: relay))
                        }
                    }
                    let id = ObjectIdentifier(channel)
                    clients.withLock { $0[id] = channel }
                    channel.closeFuture.whenComplete { _ in _ = clients.withLock { $0.removeValue(forKey: id) } }
                }
            }
            .bind(host: config.host, port: config.port ?? 0).get()
        await onRunning(server.localAddress?.port ?? config.port ?? 0, tls != nil)
        try? await gracefulShutdown()
        try? await server.close()
        // GOAWAY: clients open no new streams; those in flight finish.
        for channel in clients.withLock({ Array($0.values) }) {
            let goAway = HTTP2Frame(
                streamID: .rootStream, payload: .goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: nil))
            channel.writeAndFlush(goAway, promise: nil)
        }
        let limit = ContinuousClock.now + config.budget + config.upstreamTimeout + .seconds(1)
        while relay.pushesInFlight > 0 && ContinuousClock.now < limit {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in clients.withLock({ Array($0.values) }) {
            try? await channel.close()
        }
        try? await relay.upstream.shutdown().get()
    }
}

/// One client stream: collects the request (a body past 64 KiB is answered 413 at once), hands it
/// to the relay and writes the answer.
final class APNsStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let relay: APNsRelay
    private var head: HPACKHeaders?
    private var body: ByteBuffer?
    private var answered = false
    private static let bodyLimit = 64 * 1024

    init(relay: APNsRelay) { self.relay = relay }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        switch unwrapInboundIn(data) {
        case let .headers(frame):
            if head == nil { head = frame.headers }
            if frame.endStream { respond(context: context) }
        case let .data(frame):
            if case var .byteBuffer(buffer) = frame.data, buffer.readableBytes > 0 {
                if body == nil {
                    body = buffer
                } else {
                    body!.writeBuffer(&buffer)
                }
            }
            if (body?.readableBytes ?? 0) > Self.bodyLimit {
                answered = true
                write(
                    APNsRelay.refusal(413, "PayloadTooLarge", apnsID: head?.first(name: "apns-id")), context: context)
            } else if frame.endStream {
                respond(context: context)
            }
        default:
            break
        }
    }

    private func respond(context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let head = head ?? HPACKHeaders()
        var headers = HPACKHeaders()
        headers.reserveCapacity(head.count)
        var method = ""
        var path = ""
        for (name, value, indexing) in head {
            switch name {
            case ":method": method = value
            case ":path": path = value
            default: if !name.hasPrefix(":") { headers.add(name: name, value: value, indexing: indexing) }
            }
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        relay.handle(
            method: method, path: path, headers: headers, body: body ?? ByteBuffer(), on: context.eventLoop
        ).whenComplete { result in
            let (handler, context) = loopBound.value
            switch result {
            case let .success(answer): handler.write(answer, context: context)
            case .failure: handler.write(APNsRelay.refusal(500, "InternalServerError", apnsID: nil), context: context)
            }
        }
    }

    private func write(_ answer: APNsAnswer, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(answer.headers.count + 2)
        headers.add(name: ":status", value: String(answer.status))
        headers.add(contentsOf: answer.headers)
        let body = answer.body.flatMap { $0.readableBytes > 0 ? $0 : nil }
        if let body { headers.add(name: "content-length", value: String(body.readableBytes)) }
        context.write(wrapOutboundOut(.headers(.init(headers: headers, endStream: body == nil))), promise: nil)
        if let body {
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
        }
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
