import NIOCore

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
