import NIOCore

/// Closes a TLS connection that has not delivered its first bytes through TLS in time
/// (`RelayLimits.handshakeTimeout`): a client that starts a handshake and dribbles it, or never
/// sends a request once it is done, holds nothing longer. Sits after the TLS handler, and goes
/// once the first decrypted bytes pass.
final class RelayHandshakeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let budget: RelayBudget
    private var deadline: Scheduled<Void>?

    init(budget: RelayBudget) { self.budget = budget }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        let budget = budget
        deadline = context.eventLoop.scheduleTask(in: TimeAmount(budget.limits.handshakeTimeout)) {
            budget.count(.handshake)
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// Closes connections that stay silent: one that has sent nothing within `handshakeTimeout` of
/// opening (no TLS handshake, no request) is closed; one silent for `idleTimeout` is drained
/// (its requests in flight answered, then closed), and closed `drainTimeout` later if draining
/// did not end it (`RelayLimits`).
final class RelayIdleGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// How long a new connection may take to send its first bytes.
    private let firstBytes: TimeAmount
    /// How long a connection may stay silent once it has spoken.
    private let idle: TimeAmount
    /// How long a drained connection may take to close.
    private let drain: TimeAmount
    private var lastRead = NIODeadline.now()
    private var spoke = false
    private var check: Scheduled<Void>?

    init(limits: RelayLimits) {
        firstBytes = TimeAmount(limits.handshakeTimeout)
        idle = TimeAmount(limits.idleTimeout)
        drain = TimeAmount(limits.drainTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        lastRead = .now()
        schedule(context, at: lastRead + firstBytes)
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
        let due = lastRead + idle
        if NIODeadline.now() < due { return schedule(context, at: due) }
        context.fireUserInboundEventTriggered(RelayDrain())
        let channel = context.channel
        check = context.eventLoop.scheduleTask(in: drain) { channel.close(promise: nil) }
    }
}

/// Bounds the time an HTTP/1.1 request takes to arrive whole: from its first byte, its head and
/// body must be read within `RelayLimits.requestTimeout`, so a client that sends its header
/// lines or its body slowly holds nothing longer. Sits before the HTTP decoder;
/// `RelayHTTP1Handler` says when a request is read. A connection idle between requests is the
/// idle guard's.
final class RelayRequestGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount
    private let budget: RelayBudget?
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(limits: RelayLimits, budget: RelayBudget?) {
        timeout = TimeAmount(limits.requestTimeout)
        self.budget = budget
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if deadline == nil {
            let channel = context.channel
            let budget = budget
            deadline = context.eventLoop.scheduleTask(in: timeout) {
                budget?.count(.requestHead)
                channel.close(promise: nil)
            }
        }
        context.fireChannelRead(data)
    }

    /// A request was read whole: the next one's time starts with its first byte.
    func requestRead() {
        deadline?.cancel()
        deadline = nil
    }
}
