import CHTTP2Shim
import NIOCore

/// The server side of one HTTP/2 client connection: libnghttp2 collects each stream's request (a
/// body or header list past the limits is answered at once), the relay answers it, and the
/// answer goes out on the same stream. What is answered in one turn of the event loop is written
/// and flushed together. The connection stays within its bounds (`RelayLimits`): requests past
/// its streams or bytes, or past the relay's (`RelayBudget.admit`), are refused
/// (`REFUSED_STREAM`); a client that leaves its answers unread past `unreadTimeout`, floods empty
/// DATA frames, or that the budget sheds, gets `GOAWAY ENHANCE_YOUR_CALM`.
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
    /// The client's certificate identity, read at its first request.
    private var client: RelayClient??

    init(endpoint: Endpoint, budget: RelayBudget? = nil) {
        self.endpoint = endpoint
        self.budget = budget
        limits = endpoint.limits
        session = HTTP2Session(server: limits.server)
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
                    refuse(event.streamID, .connectionStreams)
                } else if held(plus: event.bodyLength) > limits.connectionBytes {
                    refuse(event.streamID, .connectionBytes)
                } else if let channelID, let reason = budget?.admit(channelID, bytes: event.bodyLength) {
                    refuse(event.streamID, reason)
                } else {
                    dispatch(event.streamID, session.message(event), context: context)
                }
            case PM_H2_TOO_LARGE:
                respond(endpoint.refused(.bodyTooLarge, headers: session.message(event).headers), on: event.streamID)
            case PM_H2_FIELDS_TOO_LARGE:
                respond(endpoint.refused(.headersTooLarge, headers: session.message(event).headers), on: event.streamID)
            case PM_H2_EMPTY_DATA:
                // CVE-2019-9518: a stream past `maxEmptyData` empty DATA frames ends the connection.
                budget?.count(.emptyData)
                session.terminate(.enhanceYourCalm)
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
        let sessionBytes = sessionHeld()
        let now = (streams: answering, bytes: answeringBytes + sessionBytes)
        guard now != reported else { return }
        reported = now
        budget.update(channelID, streams: now.streams, bytes: now.bytes, sessionBytes: sessionBytes)
    }

    /// Refuses stream `id` unprocessed (the client may send it again), counted under `reason`.
    private func refuse(_ id: Int32, _ reason: ShedReason) {
        session.reset(id, .refusedStream)
        budget?.count(reason)
    }

    /// Sheds this connection: `GOAWAY ENHANCE_YOUR_CALM`, written even if the client reads
    /// nothing, then closed (at once if what was written before does not go out within a second).
    private func calmDown(_ context: ChannelHandlerContext, _ reason: ShedReason) {
        guard !closing else { return }
        closing = true
        session.terminate(.enhanceYourCalm)
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
            budget?.count(.unread)
            calmDown(context, .unread)
        }
    }

    private func dispatch(_ id: Int32, _ request: HTTP2Message, context: ChannelHandlerContext) {
        answering += 1
        let bytes = request.body.readableBytes
        answeringBytes += bytes
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let budget = budget
        if client == nil { client = .some(RelayClient.of(context)) }
        let exchange = RelayExchange(
            method: request.method, path: request.path, headers: request.headers, body: request.body,
            client: client ?? nil, connection: channelID ?? ObjectIdentifier(context.channel), arrival: .now,
            eventLoop: context.eventLoop)
        endpoint.handle(exchange) { answer in
            budget?.finished(bytes: bytes)
            let (handler, context) = loopBound.value
            handler.respond(answer, on: id)
            handler.answering -= 1
            handler.answeringBytes -= bytes
            handler.pumpSoon(context)
        }
    }

    private func respond(_ answer: RelayAnswer, on id: Int32) {
        session.respond(id, answer)
    }
}
