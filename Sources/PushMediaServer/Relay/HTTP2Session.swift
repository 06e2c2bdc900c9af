import CHTTP2Shim
import NIOCore
import NIOHPACK

/// A request or an answer as received on one stream.
struct HTTP2Message {
    /// `:method` and `:path` of a request.
    var method = ""
    var path = ""
    /// `:status` of an answer.
    var status: Int?
    /// The fields without pseudo-fields; those sent as never-indexed keep that mark.
    var headers = HPACKHeaders()
    var body = ByteBuffer()
}

/// One connection's HTTP/2 (libnghttp2 through `CHTTP2Shim`): fed the bytes read, drained of
/// events, asked for the bytes to write, which `pump` writes and flushes in one piece. Settings,
/// flow control, HPACK and the protocol's rules are libnghttp2's. Used on the connection's
/// event loop only.
final class HTTP2Session {
    private let session: OpaquePointer
    /// Packed fields on their way to the shim.
    private var packed = ByteBuffer()
    /// A pump is scheduled for the end of this event-loop turn.
    fileprivate var pumpScheduled = false
    /// `receive` or `pump` met an error the connection cannot recover from.
    private(set) var broken = false

    /// A server session: `maxStreams` concurrent streams, request bodies up to `bodyLimit`.
    init(serverBodyLimit bodyLimit: Int, maxStreams: UInt32) {
        guard let session = pm_h2_server_new(bodyLimit, maxStreams) else { fatalError("out of memory") }
        self.session = session
    }

    /// A client session; answer bodies are kept up to `bodyLimit`.
    init(clientBodyLimit bodyLimit: Int) {
        guard let session = pm_h2_client_new(bodyLimit) else { fatalError("out of memory") }
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

    /// The next event of the last `receive`, if any.
    func nextEvent() -> pm_h2_event? {
        var event = pm_h2_event()
        return pm_h2_next_event(session, &event) == 1 ? event : nil
    }

    /// Reads an event's stream record and gives it back.
    func take(_ stream: OpaquePointer) -> HTTP2Message {
        defer { pm_h2_release(session, stream) }
        var message = HTTP2Message()
        var fields: UnsafePointer<UInt8>?
        let length = pm_h2_stream_fields(stream, &fields)
        if let fields, length > 0 {
            var at = 0
            while length - at >= 9 {
                let noIndex = fields[at] & UInt8(PM_H2_NO_INDEX) != 0
                let nameLength = Self.read32(fields + at + 1)
                let valueLength = Self.read32(fields + at + 5)
                at += 9
                let name = String(decoding: UnsafeBufferPointer(start: fields + at, count: nameLength), as: UTF8.self)
                let value = String(
                    decoding: UnsafeBufferPointer(start: fields + at + nameLength, count: valueLength), as: UTF8.self)
                at += nameLength + valueLength
                switch name {
                case ":method": message.method = value
                case ":path": message.path = value
                case ":status": message.status = Int(value)
                default:
                    if !name.hasPrefix(":") {
                        message.headers.add(name: name, value: value, indexing: noIndex ? .neverIndexed : .indexable)
                    }
                }
            }
        }
        var body: UnsafePointer<UInt8>?
        let bodyLength = pm_h2_stream_body(stream, &body)
        if let body, bodyLength > 0 {
            message.body.writeBytes(UnsafeRawBufferPointer(start: body, count: bodyLength))
        }
        return message
    }

    /// Gives an event's stream record back unread.
    func release(_ stream: OpaquePointer) { pm_h2_release(session, stream) }

    /// Server: answers stream `id` (with `content-length` for the body); false if the stream is gone.
    @discardableResult
    func respond(_ id: Int32, status: Int, headers: HPACKHeaders, body: ByteBuffer?) -> Bool {
        packed.clear()
        var count = 1
        pack(":status", String(status))
        for (name, value, indexing) in headers {
            pack(name, value, noIndex: indexing != .indexable)
            count += 1
        }
        let body = body ?? ByteBuffer()
        if body.readableBytes > 0 {
            pack("content-length", String(body.readableBytes))
            count += 1
        }
        let result = packed.withUnsafeReadableBytes { fields in
            body.withUnsafeReadableBytes { bytes in
                pm_h2_respond(
                    session, id, fields.bindMemory(to: UInt8.self).baseAddress, fields.count, count,
                    bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
            }
        }
        return result == 0
    }

    /// Server: `GOAWAY` naming the last stream processed.
    func goAway() { _ = pm_h2_goaway(session) }

    /// Server: refuses stream `id` unprocessed (`RST_STREAM REFUSED_STREAM`: the client may send it again).
    func refuse(_ id: Int32) { _ = pm_h2_reset(session, id, 7) }

    /// Client: opens a stream for a POST; its id, or nil when the connection can take no more.
    func request(authority: String, path: String, headers: HPACKHeaders, body: ByteBuffer) -> Int32? {
        packed.clear()
        pack(":method", "POST")
        pack(":scheme", "https")
        pack(":authority", authority)
        // Never the same twice (a device token each): kept out of the HPACK table, which then
        // holds the fields that repeat and stays quick to search.
        pack(":path", path, noIndex: true)
        var count = 4
        for (name, value, indexing) in headers {
            pack(name, value, noIndex: indexing != .indexable)
            count += 1
        }
        pack("content-length", String(body.readableBytes))
        count += 1
        let id = packed.withUnsafeReadableBytes { fields in
            body.withUnsafeReadableBytes { bytes in
                pm_h2_request(
                    session, fields.bindMemory(to: UInt8.self).baseAddress, fields.count, count,
                    bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
            }
        }
        return id > 0 ? id : nil
    }

    /// Client: gives up stream `id` (`RST_STREAM CANCEL`, or never sent if still queued).
    func cancel(_ id: Int32) { pm_h2_cancel(session, id, 8) }

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

    private func pack(_ name: String, _ value: String, noIndex: Bool = false) {
        let nameLength = name.utf8.count
        let valueLength = value.utf8.count
        packed.writeWithUnsafeMutableBytes(minimumWritableBytes: 9 + nameLength + valueLength) { out in
            out[0] = noIndex ? UInt8(PM_H2_NO_INDEX) : 0
            for byte in 0..<4 {
                out[1 + byte] = UInt8(truncatingIfNeeded: nameLength >> (8 * byte))
                out[5 + byte] = UInt8(truncatingIfNeeded: valueLength >> (8 * byte))
            }
            Self.copy(name, to: out, at: 9)
            Self.copy(value, to: out, at: 9 + nameLength)
            return 9 + nameLength + valueLength
        }
    }

    private static func copy(_ text: String, to out: UnsafeMutableRawBufferPointer, at offset: Int) {
        let copied = text.utf8.withContiguousStorageIfAvailable { utf8 in
            UnsafeMutableRawBufferPointer(rebasing: out[offset...]).copyMemory(from: UnsafeRawBufferPointer(utf8))
        }
        if copied == nil {
            for (index, byte) in text.utf8.enumerated() { out[offset + index] = byte }
        }
    }

    private static func read32(_ at: UnsafePointer<UInt8>) -> Int {
        Int(at[0]) | Int(at[1]) << 8 | Int(at[2]) << 16 | Int(at[3]) << 24
    }
}

/// A handler that serves one connection's `HTTP2Session`.
protocol HTTP2ConnectionHandler: AnyObject {
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
