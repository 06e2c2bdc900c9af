import CHTTP2Shim
import Foundation
import NIOCore
import NIOHPACK

/// A request or an answer as received on one stream.
struct HTTP2Message {
    /// `:method` and `:path` of a request.
    var method = ""
    var path = ""
    /// `:status` of an answer.
    var status: Int?
    /// The fields without pseudo-fields and `content-length`; those sent as never-indexed keep
    /// that mark.
    var headers = HPACKHeaders()
    var body = ByteBuffer()
}

/// One event of a session, for the time it is handled: `HTTP2Session.handleEvents` frees it
/// after the handler returns, so nothing of it is kept (`message` copies what it carries).
struct HTTP2Event {
    fileprivate let raw: UnsafeMutablePointer<pm_h2_event>

    var kind: pm_h2_event_kind { raw.pointee.kind }
    var streamID: Int32 { raw.pointee.stream_id }
    var code: UInt32 { raw.pointee.code }
    /// Bytes of the body it carries.
    var bodyLength: Int { raw.pointee.body_length }

    /// The request or answer it carries: fields (pseudo-fields taken apart) and body. Long
    /// values that repeat on a connection (a token, a topic) are taken from `recent` rather than
    /// made again.
    func message(recent: inout RecentValues) -> HTTP2Message {
        var message = HTTP2Message()
        let event = raw.pointee
        // About 40 bytes a field: room for all at once, the outcome the relay adds included.
        message.headers.reserveCapacity(event.fields_length / 40 + 2)
        if let packed = event.fields {
            var offset = 0
            var field = pm_h2_field()
            while pm_h2_field_next(packed, event.fields_length, &offset, &field) == 1 {
                let name = String(
                    decoding: UnsafeBufferPointer(start: field.name, count: field.name_length), as: UTF8.self)
                let bytes = UnsafeBufferPointer(start: field.value, count: field.value_length)
                switch name {
                case ":method": message.method = String(decoding: bytes, as: UTF8.self)
                case ":path": message.path = String(decoding: bytes, as: UTF8.self)
                case ":status": message.status = Int(String(decoding: bytes, as: UTF8.self))
                case "content-length": break  // the transport's: the body is whole
                default:
                    if !name.hasPrefix(":") {
                        let noIndex = field.flags & UInt8(PM_H2_NO_INDEX) != 0
                        message.headers.add(
                            name: name, value: recent.value(of: name, bytes),
                            indexing: noIndex ? .neverIndexed : .indexable)
                    }
                }
            }
        }
        if let body = event.body, event.body_length > 0 {
            message.body = ByteBuffer(bytes: UnsafeRawBufferPointer(start: body, count: event.body_length))
        }
        return message
    }
}

/// The last long value of a few header names on one connection: the same token or topic on
/// every request is one string, not one allocation a request.
struct RecentValues {
    private var kept: [(name: String, value: String)] = []
    /// Names remembered at most; values shorter than `shortest` fit in a string without allocating.
    static let names = 8
    static let shortest = 16

    /// `bytes` as a string: the one kept for `name` when it holds the same bytes.
    mutating func value(of name: String, _ bytes: UnsafeBufferPointer<UInt8>) -> String {
        guard bytes.count >= Self.shortest else { return String(decoding: bytes, as: UTF8.self) }
        let index = kept.firstIndex { $0.name == name }
        if let index {
            var value = kept[index].value
            let same = value.withUTF8 { kept in
                kept.count == bytes.count && memcmp(kept.baseAddress!, bytes.baseAddress!, bytes.count) == 0
            }
            if same { return value }
        }
        let value = String(decoding: bytes, as: UTF8.self)
        if let index {
            kept[index].value = value
        } else if kept.count < Self.names {
            kept.append((name, value))
        }
        return value
    }
}

/// Header fields on their way to the shim: their bytes in one array, and `pm_h2_field`s
/// pointing into it built for the call (on the stack). Reused: clearing keeps the capacity.
struct HTTP2OutgoingFields {
    private var bytes: [UInt8] = []
    private var spans: [(name: Int, nameLength: Int, valueLength: Int, flags: UInt8)] = []

    var count: Int { spans.count }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
    }

    mutating func append(_ name: String, _ value: String, noIndex: Bool = false) {
        let start = bytes.count
        var (name, value) = (name, value)
        name.withUTF8 { bytes.append(contentsOf: $0) }
        let nameLength = bytes.count - start
        value.withUTF8 { bytes.append(contentsOf: $0) }
        spans.append((start, nameLength, bytes.count - start - nameLength, noIndex ? UInt8(PM_H2_NO_INDEX) : 0))
    }

    /// Calls `body` with the fields as the shim takes them, valid during the call.
    func withFields<Result>(_ body: (UnsafePointer<pm_h2_field>?, Int) -> Result) -> Result {
        bytes.withUnsafeBufferPointer { storage in
            withUnsafeTemporaryAllocation(of: pm_h2_field.self, capacity: max(spans.count, 1)) { fields in
                let base = storage.baseAddress
                for (index, span) in spans.enumerated() {
                    let name = base.map { $0 + span.name }
                    fields[index] = pm_h2_field(
                        name: name, value: name.map { $0 + span.nameLength }, name_length: span.nameLength,
                        value_length: span.valueLength, flags: span.flags)
                }
                return body(UnsafePointer(fields.baseAddress), spans.count)
            }
        }
    }
}

/// HTTP/2's error codes (RFC 9113 section 7), as `RST_STREAM` and `GOAWAY` carry them.
enum HTTP2ErrorCode: UInt32, Sendable {
    case noError = 0x0
    case protocolError = 0x1
    case internalError = 0x2
    case flowControlError = 0x3
    case settingsTimeout = 0x4
    case streamClosed = 0x5
    case frameSizeError = 0x6
    /// The stream was not processed: the client may send it again.
    case refusedStream = 0x7
    case cancel = 0x8
    case compressionError = 0x9
    case connectError = 0xa
    /// The peer is generating excessive load.
    case enhanceYourCalm = 0xb
    case inadequateSecurity = 0xc
    case http11Required = 0xd
}

/// What one side of a connection allows and advertises (`pm_h2_limits`): every bound the shim
/// keeps comes from here.
struct HTTP2Limits: Sendable, Equatable {
    /// Request bodies past this (server) are `PM_H2_TOO_LARGE`; answer bodies (client) are cut here.
    var bodyLimit: Int
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` advertised.
    var maxStreams: Int
    /// `SETTINGS_MAX_HEADER_LIST_SIZE` advertised, and the most bytes of fields kept per message.
    var maxHeaderList: Int
    /// `SETTINGS_INITIAL_WINDOW_SIZE` advertised.
    var streamWindow: Int
    /// The connection's receive window.
    var connectionWindow: Int
    /// Empty DATA frames without END_STREAM a stream may carry (CVE-2019-9518).
    var maxEmptyData: Int
    /// Client: streams opened at once until the server's SETTINGS arrive (Apple starts a
    /// connection at 1 and refuses streams over it).
    var peerMaxStreamsInitial = 1

    fileprivate var shim: pm_h2_limits {
        pm_h2_limits(
            body_limit: bodyLimit, max_streams: UInt32(clamping: maxStreams),
            max_header_list: UInt32(clamping: maxHeaderList), stream_window: UInt32(clamping: streamWindow),
            connection_window: UInt32(clamping: connectionWindow), max_empty_data: UInt32(clamping: maxEmptyData),
            peer_max_streams_initial: UInt32(clamping: peerMaxStreamsInitial))
    }
}

/// One connection's HTTP/2 (libnghttp2 through `CHTTP2Shim`): fed the bytes read, drained of
/// events, asked for the bytes to write, which `pump` writes and flushes in one piece. Settings,
/// flow control, HPACK and the protocol's rules are libnghttp2's, within `HTTP2Limits`; what to do
/// about a request, a flood or an unread answer (answer, reset, `GOAWAY`) is the handlers'. Used
/// on the connection's event loop only.
final class HTTP2Session {
    private let session: OpaquePointer
    /// Fields on their way to the shim.
    private var fields = HTTP2OutgoingFields()
    /// A pump is scheduled for the end of this event-loop turn.
    fileprivate var pumpScheduled = false
    /// `receive` or `pump` met an error the connection cannot recover from.
    private(set) var broken = false
    /// Long header values seen lately on the connection.
    private var recent = RecentValues()

    /// A server session within `limits`.
    init(server limits: HTTP2Limits) {
        var shim = limits.shim
        guard let session = pm_h2_server_new(&shim) else { fatalError("out of memory") }
        self.session = session
    }

    /// A client session within `limits`.
    init(client limits: HTTP2Limits) {
        var shim = limits.shim
        guard let session = pm_h2_client_new(&shim) else { fatalError("out of memory") }
        self.session = session
    }

    deinit { pm_h2_free(session) }

    /// Feeds bytes read from the peer; events are then ready.
    func receive(_ bytes: ByteBuffer) {
        guard !broken else { return }
        let result = bytes.withUnsafeReadableBytes { raw in
            pm_h2_recv(session, raw.bindMemory(to: UInt8.self).baseAddress, raw.count)
        }
        if result < 0 { broken = true }
    }

    /// Hands each pending event to `handle`, in order, and frees it after.
    func handleEvents(_ handle: (HTTP2Event) -> Void) {
        while let raw = pm_h2_next_event(session) {
            handle(HTTP2Event(raw: raw))
            pm_h2_event_free(raw)
        }
    }

    /// The request or answer `event` carries.
    func message(_ event: HTTP2Event) -> HTTP2Message { event.message(recent: &recent) }

    /// What the session holds now.
    var load: pm_h2_load {
        var load = pm_h2_load()
        pm_h2_get_load(session, &load)
        return load
    }

    /// Server: answers stream `id` (with `content-length` for the body, in place of any in its
    /// headers); false if the stream is gone. Fields whose value is new on every answer
    /// (`HTTP2Session.unique`) are kept out of the HPACK table.
    @discardableResult
    func respond(_ id: Int32, _ answer: RelayAnswer) -> Bool {
        fields.removeAll()
        fields.append(":status", String(answer.status))
        answer.forEachField { name, value, indexing in
            guard name != "content-length" else { return }
            fields.append(name, value, noIndex: indexing != .indexable || Self.unique(name))
        }
        let body = answer.body ?? ByteBuffer()
        if body.readableBytes > 0 { fields.append("content-length", String(body.readableBytes)) }
        let result = fields.withFields { fields, count in
            body.withUnsafeReadableBytes { bytes in
                pm_h2_respond(session, id, fields, count, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
            }
        }
        return result == 0
    }

    /// `GOAWAY` naming the last stream processed, `NO_ERROR`: the streams in flight go on.
    func goAway() { _ = pm_h2_goaway(session) }

    /// `GOAWAY` with `code`: the connection ends once it is written.
    func terminate(_ code: HTTP2ErrorCode) { _ = pm_h2_terminate(session, code.rawValue) }

    /// `RST_STREAM` on stream `id` with `code`; a client's request still queued is not sent.
    func reset(_ id: Int32, _ code: HTTP2ErrorCode) { _ = pm_h2_reset(session, id, code.rawValue) }

    /// Client: the streams the server allows open at once (its `SETTINGS_MAX_CONCURRENT_STREAMS`).
    var peerMaxStreams: Int { Int(pm_h2_peer_max_streams(session)) }

    /// Headers whose value is new on every message (`apns-id`, `apns-unique-id`): not worth a
    /// place in a connection's HPACK table.
    static func unique(_ name: String) -> Bool { name == "apns-id" || name == "apns-unique-id" }

    /// Client: opens a stream for a POST; its id, or nil when the connection can take no more.
    func request(authority: String, path: String, headers: HPACKHeaders, body: ByteBuffer) -> Int32? {
        fields.removeAll()
        fields.append(":method", "POST")
        fields.append(":scheme", "https")
        fields.append(":authority", authority)
        // Never the same twice (a device token each): kept out of the HPACK table, which then
        // holds the fields that repeat and stays quick to search.
        fields.append(":path", path, noIndex: true)
        for (name, value, indexing) in headers {
            fields.append(name, value, noIndex: indexing != .indexable || Self.unique(name))
        }
        fields.append("content-length", String(body.readableBytes))
        let id = fields.withFields { fields, count in
            body.withUnsafeReadableBytes { bytes in
                pm_h2_request(session, fields, count, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
            }
        }
        return id > 0 ? id : nil
    }

    /// Client: a `PING`, sent with the next pump.
    func ping() { _ = pm_h2_ping(session) }

    /// Whether the session still wants to read or write; false once the connection can close.
    var alive: Bool { !broken && pm_h2_alive(session) != 0 }

    /// Writes and flushes what the session has to send. While the channel is not writable (the
    /// peer does not read) it stays in libnghttp2's queue, whose flood guard then ends the
    /// connection; `always` writes it all the same (the last bytes before closing).
    func pump(_ context: ChannelHandlerContext, always: Bool = false) {
        guard always || context.channel.isWritable else { return }
        var out: ByteBuffer?
        while true {
            var data: UnsafePointer<UInt8>?
            let length = pm_h2_send(session, &data)
            guard length > 0, let data else {
                if length < 0 { broken = true }
                break
            }
            if out == nil { out = context.channel.allocator.buffer(capacity: max(length, 4096)) }
            out!.writeBytes(UnsafeRawBufferPointer(start: data, count: length))
        }
        if let out { context.writeAndFlush(NIOAny(out), promise: nil) }
    }
}

/// A handler that serves one connection's `HTTP2Session`.
protocol HTTP2ConnectionHandler: AnyObject, SendableMetatype {
    var session: HTTP2Session { get }
    /// Acts on the session's events (after a read, and after a pump: sending raises some too).
    func handleEvents(_ context: ChannelHandlerContext)
    /// Called after each pump: closes the connection once it is done.
    func pumped(_ context: ChannelHandlerContext)
}

extension HTTP2ConnectionHandler {
    /// Feeds bytes read and acts on what they raised.
    func receive(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        session.receive(bytes)
        handleEvents(context)
    }

    /// Writes what the session has to send, now.
    func pump(_ context: ChannelHandlerContext) {
        session.pump(context)
        handleEvents(context)
        pumped(context)
    }

    /// Closes the connection once what was written before is out (an empty write completes
    /// after the writes before it).
    func closeAfterWrites(_ context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(NIOAny(channel.allocator.buffer(capacity: 0))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    /// Pumps at the end of this event-loop turn, with whatever else is answered in it.
    func pumpSoon(_ context: ChannelHandlerContext) {
        guard !session.pumpScheduled else { return }
        session.pumpScheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = loopBound.value
            handler.session.pumpScheduled = false
            handler.pump(context)
        }
    }
}
