import NIOCore
import NIOHPACK
import NIOHTTP1

/// The server side of one HTTP/1.1 client connection: one request at a time (SwiftNIO's pipelining
/// handler holds the next until the answer is written). A request is admitted as an HTTP/2 one
/// is (`RelayBudget.admit`): one past the relay's bounds is answered 503 in the relay's shape, and
/// one whose body passes `RelayLimits.maxBody` is answered 413 at once and its connection closed.
final class RelayHTTP1Handler<Endpoint: RelayEndpoint>: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: Endpoint
    private let budget: RelayBudget?
    private let requestGuard: RelayRequestGuard?
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var answering = false
    private var draining = false
    /// The client's certificate identity, read at its first request.
    private var client: RelayClient??

    init(endpoint: Endpoint, budget: RelayBudget? = nil, requestGuard: RelayRequestGuard? = nil) {
        self.endpoint = endpoint
        self.budget = budget
        self.requestGuard = requestGuard
    }

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
            if body!.readableBytes > endpoint.limits.maxBody {
                head = nil
                body = nil
                answering = true
                let refusal = endpoint.refused(.bodyTooLarge, headers: Self.headers(of: requestHead))
                write(refusal, keepAlive: false, context: context)
            }
        case .end:
            requestGuard?.requestRead()
            guard let requestHead = head else { return }
            head = nil
            let requestBody = body ?? ByteBuffer()
            body = nil
            answering = true
            dispatch(requestHead, body: requestBody, context: context)
        }
    }

    /// Hands a whole request to the relay, once the budget admits it.
    private func dispatch(_ requestHead: HTTPRequestHead, body: ByteBuffer, context: ChannelHandlerContext) {
        let keepAlive = requestHead.isKeepAlive
        let headers = Self.headers(of: requestHead)
        let connection = ObjectIdentifier(context.channel)
        let bytes = body.readableBytes
        if let budget, let reason = budget.admit(connection, bytes: bytes) {
            budget.count(reason)
            return write(endpoint.refused(.overloaded, headers: headers), keepAlive: keepAlive, context: context)
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        if client == nil { client = .some(RelayClient.of(context)) }
        let exchange = RelayExchange(
            method: requestHead.method.rawValue, path: requestHead.uri, headers: headers, body: body,
            client: client ?? nil, connection: connection, arrival: .now, eventLoop: context.eventLoop)
        let budget = budget
        endpoint.handle(exchange) { answer in
            budget?.finished(bytes: bytes)
            let (handler, context) = loopBound.value
            handler.write(answer, keepAlive: keepAlive, context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is RelayShed { return context.close(promise: nil) }
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
        answer.forEachField { name, value, _ in headers.add(name: name, value: value) }
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
