// A fast stand-in for Apple's and Google's push servers, for the relays' fairness tests and
// benchmarks: HTTP/2 over TLS (ALPN h2) or cleartext, SwiftNIO's HTTP/2 at the frame level (not
// the relay's own libnghttp2), `SETTINGS_MAX_CONCURRENT_STREAMS` of `--max-streams` (a stream
// past it is refused by SwiftNIO), and every request answered 200 after `--hold-ms`: `apns-id`
// echoed (or a new one) for APNs paths, `{"name":…}` for FCM's. It checks nothing: the strict
// stand-ins of Tests/apns and Tests/fcm check the contracts. On SIGTERM it prints the most streams
// a connection had open at once.
//
//   relay-standin [--port 0] [--tls-cert server.pem --tls-key server.key] [--hold-ms 20] [--max-streams 100]
//
// Prints "relay-standin listening on <port>" once it listens; stops on SIGTERM or SIGINT.

import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

struct Options {
    var port = 0
    var certificate: String?
    var key: String?
    var hold: TimeAmount = .milliseconds(20)
    var maxStreams = 100

    init(_ arguments: [String]) {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { Self.usage("\(flag) needs a value") }
            let number = Int(value)
            switch flag {
            case "--tls-cert": certificate = value
            case "--tls-key": key = value
            case "--port" where number != nil: port = number!
            case "--hold-ms" where number != nil: hold = .milliseconds(Int64(number!))
            case "--max-streams" where number != nil: maxStreams = number!
            default: Self.usage("\(flag) \(value)")
            }
        }
    }

    static func usage(_ problem: String) -> Never {
        FileHandle.standardError.write(
            Data(
                ("relay-standin: \(problem)\nusage: relay-standin [--port N] [--tls-cert PEM --tls-key PEM] "
                    + "[--hold-ms N] [--max-streams N]\n").utf8))
        exit(64)
    }
}

/// One connection's streams at the frame level (no channel per stream): each request read
/// whole, its answer written `hold` later; the most streams seen open at once is reported.
final class StreamAnswerer: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let hold: TimeAmount
    /// Streams whose request is still arriving: the answer's `apns-id`, and whether it is FCM's.
    private var open: [HTTP2StreamID: (id: String?, fcm: Bool)] = [:]
    private var answering = 0
    /// DATA bytes received and not yet given back to the connection's window.
    private var unacknowledged = 0
    private static let most = NIOLockedValueBox(0)

    init(hold: TimeAmount) { self.hold = hold }

    /// The most streams any connection had open at once.
    static var mostOpen: Int { most.withLockedValue { $0 } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let ended: Bool
        switch frame.payload {
        case let .headers(headers):
            let path = headers.headers.first(name: ":path") ?? ""
            open[frame.streamID] = (headers.headers.first(name: "apns-id"), !path.hasPrefix("/3/device/"))
            ended = headers.endStream
        case let .data(data):
            ended = data.endStream
            // Without a channel per stream nothing gives the connection's window back: done here.
            unacknowledged += data.data.readableBytes
            if unacknowledged >= 32 * 1024 {
                let update = HTTP2Frame(
                    streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledged))
                context.writeAndFlush(wrapOutboundOut(update), promise: nil)
                unacknowledged = 0
            }
        default:
            return
        }
        guard ended, let request = open.removeValue(forKey: frame.streamID) else { return }
        answering += 1
        let seen = answering
        Self.most.withLockedValue { $0 = max($0, seen) }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: hold) {
            let (answerer, context) = loopBound.value
            answerer.answer(frame.streamID, request, context: context)
        }
    }

    private func answer(_ stream: HTTP2StreamID, _ request: (id: String?, fcm: Bool), context: ChannelHandlerContext) {
        answering -= 1
        var headers: HPACKHeaders = [":status": "200"]
        if request.fcm {
            var body = context.channel.allocator.buffer(capacity: 64)
            body.writeString(#"{"name":"projects/standin/messages/1"}"#)
            headers.add(name: "content-type", value: "application/json; charset=UTF-8")
            headers.add(name: "content-length", value: String(body.readableBytes))
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers)))), promise: nil)
            let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(body), endStream: true)
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .data(data))), promise: nil)
        } else {
            headers.add(name: "apns-id", value: request.id ?? UUID().uuidString)
            let frame = HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers, endStream: true)))
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        }
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
let tls: NIOSSLContext? = try options.certificate.flatMap { certificate in
    guard let key = options.key else { return nil }
    var configuration = TLSConfiguration.makeServerConfiguration(
        certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
        privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
    configuration.applicationProtocols = ["h2"]
    return try NIOSSLContext(configuration: configuration)
}
let hold = options.hold
let settings = [
    HTTP2Setting(parameter: .maxConcurrentStreams, value: options.maxStreams),
    HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
]
let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
let server = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 1024)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        if let tls {
            do { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
        }
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandlers(
                NIOHTTP2Handler(mode: .server, initialSettings: settings), StreamAnswerer(hold: hold))
        }
    }
    .bind(host: "127.0.0.1", port: options.port).wait()
FileHandle.standardOutput.write(Data("relay-standin listening on \(server.localAddress?.port ?? 0)\n".utf8))
let stops = [SIGTERM, SIGINT].map { signal in
    let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
    source.setEventHandler {
        FileHandle.standardOutput.write(
            Data("relay-standin most streams open on a connection: \(StreamAnswerer.mostOpen)\n".utf8))
        exit(0)
    }
    source.resume()
    Foundation.signal(signal, SIG_IGN)
    return source
}
try server.closeFuture.wait()
_ = stops
