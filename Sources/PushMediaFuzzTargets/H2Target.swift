import CHTTP2Shim

// h2: the relays' HTTP/2 sessions (libnghttp2 through the shim) over bytes from the peer.
extension FuzzTargets {
    /// The first byte picks the side: even, a server session fed a client's bytes (after the
    /// connection preface); odd, a client session with three requests in flight fed a server's
    /// bytes. The second byte splits the rest into reads of that many bytes (0: one read).
    /// Every event's record is read and given back, requests are answered, streams cancelled,
    /// output drained; the records' field layout and the body limit hold throughout.
    public static func h2(_ data: [UInt8]) {
        guard data.count >= 2 else { return }
        let client = data[0] & 1 == 1
        let chunk = Int(data[1]) == 0 ? Int.max : Int(data[1])
        let bodyLimit = 512
        guard let session = client ? pm_h2_client_new(bodyLimit) : pm_h2_server_new(bodyLimit, 16) else { return }
        defer { pm_h2_free(session) }
        var input = Array(data.dropFirst(2))
        if client {
            for index in 0..<3 {
                let fields = packed([
                    (":method", "POST"), (":scheme", "https"), (":authority", "upstream.test"),
                    (":path", "/3/device/\(index)"), ("content-length", "2"),
                ])
                _ = fields.bytes.withUnsafeBufferPointer { fieldBytes in
                    Array("{}".utf8).withUnsafeBufferPointer { body in
                        pm_h2_request(
                            session, fieldBytes.baseAddress, fieldBytes.count, fields.count, body.baseAddress, 2)
                    }
                }
            }
        } else {
            input = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + input
        }
        drainOutput(session)
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + chunk)
            let result = input[offset..<end].withUnsafeBufferPointer { pm_h2_recv(session, $0.baseAddress, $0.count) }
            offset = end
            handleEvents(session, client: client, bodyLimit: bodyLimit)
            drainOutput(session)
            if result < 0 { break }
        }
        if client {
            for stream in [Int32(1), 3, 5] { pm_h2_cancel(session, stream, 8) }
            drainOutput(session)
        }
    }

    private static func handleEvents(_ session: OpaquePointer, client: Bool, bodyLimit: Int) {
        var event = pm_h2_event()
        while pm_h2_next_event(session, &event) == 1 {
            guard let stream = event.stream else { continue }
            checkFields(stream)
            var body: UnsafePointer<UInt8>?
            let bodyLength = pm_h2_stream_body(stream, &body)
            precondition(bodyLength <= bodyLimit, "a body of \(bodyLength) bytes past the \(bodyLimit)-byte limit")
            pm_h2_release(session, stream)
            if !client && (event.kind == PM_H2_REQUEST || event.kind == PM_H2_TOO_LARGE) {
                let status = event.kind == PM_H2_REQUEST ? "200" : "413"
                let fields = packed([(":status", status), ("content-length", "4")])
                _ = fields.bytes.withUnsafeBufferPointer { fieldBytes in
                    Array("done".utf8).withUnsafeBufferPointer { answer in
                        pm_h2_respond(
                            session, event.stream_id, fieldBytes.baseAddress, fieldBytes.count, fields.count,
                            answer.baseAddress, 4)
                    }
                }
            }
        }
    }

    /// A record's packed fields are whole: each length stays within what is left.
    private static func checkFields(_ stream: OpaquePointer) {
        var fields: UnsafePointer<UInt8>?
        let length = pm_h2_stream_fields(stream, &fields)
        guard let fields, length > 0 else { return }
        var at = 0
        while at < length {
            precondition(length - at >= 9, "a field's header cut at \(at) of \(length)")
            func read32(_ offset: Int) -> Int {
                (0..<4).reduce(0) { $0 | Int(fields[offset + $1]) << (8 * $1) }
            }
            let total = 9 + read32(at + 1) + read32(at + 5)
            precondition(length - at >= total, "a field of \(total) bytes past the record's \(length)")
            at += total
        }
    }

    private static func drainOutput(_ session: OpaquePointer) {
        var data: UnsafePointer<UInt8>?
        for _ in 0..<1000 where pm_h2_send(session, &data) > 0 {}
    }

    /// Fields in the shim's packed layout.
    private static func packed(_ fields: [(String, String)]) -> (bytes: [UInt8], count: Int) {
        var bytes: [UInt8] = []
        for (name, value) in fields {
            bytes.append(0)
            for length in [name.utf8.count, value.utf8.count] {
                for shift in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: length >> (8 * shift))) }
            }
            bytes += Array(name.utf8) + Array(value.utf8)
        }
        return (bytes, fields.count)
    }
}
