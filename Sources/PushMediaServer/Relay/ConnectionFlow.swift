import NIOCore
import NIOHTTP2

/// What both ends of the relay do on an HTTP/2 connection they handle frame by frame: open a
/// large connection window once the preface is exchanged (many pushes are in flight at once),
/// give back what was received as it is consumed, and flush the writes of one event-loop turn
/// together. Used on the connection's event loop only.
final class ConnectionFlow {
    private var opened = false
    private var received = 0
    private var flushScheduled = false

    /// The connection window opened on top of the protocol's 65,535 bytes: 16 MiB.
    static let window = 1 << 24

    /// Opens the connection window, once (after the preface: the first frame sent or received).
    func open(_ context: ChannelHandlerContext) {
        guard !opened else { return }
        opened = true
        write(.windowUpdate(windowSizeIncrement: Self.window), context: context)
    }

    /// Counts the bytes of a DATA frame received.
    func received(_ data: HTTP2Frame.FramePayload.Data) {
        if case let .byteBuffer(buffer) = data.data { received += buffer.readableBytes }
        received += data.paddingBytes ?? 0
    }

    /// At the end of a read: gives the window back once a quarter of it was used.
    func readComplete(_ context: ChannelHandlerContext) {
        guard received >= Self.window / 4 else { return }
        write(.windowUpdate(windowSizeIncrement: received), context: context)
        received = 0
    }

    /// Flushes at the end of this event-loop turn, with whatever else is written in it.
    func flushSoon(_ context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (flow, context) = loopBound.value
            flow.flushScheduled = false
            context.flush()
        }
    }

    private func write(_ payload: HTTP2Frame.FramePayload, context: ChannelHandlerContext) {
        context.write(NIOAny(HTTP2Frame(streamID: .rootStream, payload: payload)), promise: nil)
        flushSoon(context)
    }
}
