import CHTTP2Shim

// h2: the relays' HTTP/2 sessions (libnghttp2 through the shim) over bytes from the peer, with
// the listener's and the upstream client's schedule around them: answers given later, timers
// that cancel streams mid-way, a writer that blocks while the peer does not read.
extension FuzzTargets {
    /// The first byte picks the side (bit 0: even, a server session fed a client's bytes after
    /// the connection preface; odd, a client session with three requests in flight fed a
    /// server's bytes) and, with the second, seeds the schedule. The second byte splits the rest
    /// into reads of that many bytes (0: one read). Between reads the schedule does one of: the
    /// writer blocks (nothing is taken from the session) or unblocks (all of it is); a timer
    /// fires (server: the oldest request held is answered; client: the oldest stream pending is
    /// cancelled, as a push past its deadline); the server resets a request it holds, or the
    /// client opens one more; `GOAWAY`, gracefully or `ENHANCE_YOUR_CALM`. Every event is read
    /// and freed once; a stream ends at most once; fields decode, bodies keep their limit, and
    /// the session's load stays consistent throughout.
    public static func h2(_ data: [UInt8]) {
        guard data.count >= 2 else { return }
        var run = H2Run(client: data[0] & 1 == 1, seed: UInt64(data[0]) << 8 | UInt64(data[1]))
        guard run.session != nil else { return }
        defer { run.close() }
        let chunk = Int(data[1]) == 0 ? Int.max : Int(data[1])
        var input = Array(data.dropFirst(2))
        if run.client {
            for index in 0..<3 { run.open(index) }
        } else {
            input = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + input
        }
        run.write()
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + chunk)
            let result = input[offset..<end].withUnsafeBufferPointer {
                pm_h2_recv(run.session, $0.baseAddress, $0.count)
            }
            offset = end
            run.handleEvents()
            run.step()
            run.write()
            if result < 0 { break }
        }
        run.finish()
    }
}

/// One fuzzing run's session and the schedule's state.
private struct H2Run {
    let client: Bool
    let bodyLimit = 512
    var session: OpaquePointer?
    /// xorshift64 state: the schedule.
    var state: UInt64
    var blocked = false
    /// Server: requests received and not yet answered, oldest first.
    var held: [Int32] = []
    /// Client: streams opened and not yet ended or cancelled, oldest first.
    var pending: [Int32] = []
    /// Client: every stream that ended (closed or refused), each once.
    var ended: Set<Int32> = []
    var opened = 0

    init(client: Bool, seed: UInt64) {
        self.client = client
        state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var limits = pm_h2_limits(
            body_limit: bodyLimit, max_streams: 16, max_header_list: 65_536, stream_window: 262_144,
            connection_window: 1 << 24, max_empty_data: 64, peer_max_streams_initial: 1)
        session = client ? pm_h2_client_new(&limits) : pm_h2_server_new(&limits)
    }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }

    /// One thing the schedule does between two reads.
    mutating func step() {
        switch next() % 16 {
        case 0, 1: blocked = true
        case 2, 3: blocked = false
        case 4, 5, 6:
            if client {
                if !pending.isEmpty { _ = pm_h2_reset(session, pending.removeFirst(), 8) }
            } else if !held.isEmpty {
                answer(held.removeFirst())
            }
        case 7:
            if client {
                if opened < 64 { open(opened) }
            } else if !held.isEmpty {
                _ = pm_h2_reset(session, held.removeFirst(), 7)
            }
        case 8 where !client: _ = pm_h2_goaway(session)
        case 9 where !client:
            if next() % 8 == 0 { _ = pm_h2_terminate(session, 0xb) }
        default: break
        }
        checkLoad()
    }

    /// Client: a POST like the upstream's, with fields the shim copies.
    mutating func open(_ index: Int) {
        let fields = [
            (":method", "POST"), (":scheme", "https"), (":authority", "upstream.test"),
            (":path", "/3/device/\(index)"), ("content-length", "2"),
        ]
        let id = withFields(fields) { fields, count in
            Array("{}".utf8).withUnsafeBufferPointer { body in
                pm_h2_request(session, fields, count, body.baseAddress, 2)
            }
        }
        opened += 1
        if id > 0 { pending.append(id) }
    }

    func answer(_ id: Int32, status: String = "200") {
        _ = withFields([(":status", status), ("content-length", "4")]) { fields, count in
            Array("done".utf8).withUnsafeBufferPointer { body in
                pm_h2_respond(session, id, fields, count, body.baseAddress, 4)
            }
        }
    }

    mutating func handleEvents() {
        while let event = pm_h2_next_event(session) {
            let kind = event.pointee.kind
            let id = event.pointee.stream_id
            checkFields(event.pointee)
            precondition(
                event.pointee.body_length <= bodyLimit,
                "a body of \(event.pointee.body_length) bytes past the \(bodyLimit)-byte limit")
            pm_h2_event_free(event)
            switch kind {
            case PM_H2_REQUEST:
                precondition(!client, "a request event on a client")
                // Half answered at once, half held for a timer, as the relay's answers come.
                if next() % 2 == 0 { answer(id) } else { held.append(id) }
            case PM_H2_TOO_LARGE:
                answer(id, status: "413")
            case PM_H2_CLOSED, PM_H2_REFUSED:
                precondition(client, "a stream's end on a server")
                precondition(ended.insert(id).inserted, "stream \(id) ended twice")
                pending.removeAll { $0 == id }
            default: break
            }
        }
    }

    /// Takes what the session has to send, unless the writer is blocked.
    mutating func write() {
        guard !blocked else { return }
        var data: UnsafePointer<UInt8>?
        for _ in 0..<1000 where pm_h2_send(session, &data) > 0 {}
        handleEvents()
    }

    /// After the input: the writer unblocks, held requests are answered and pending streams
    /// cancelled, as the relay's timers would.
    mutating func finish() {
        blocked = false
        write()
        for id in held { answer(id) }
        held = []
        for id in pending { _ = pm_h2_reset(session, id, 8) }
        write()
        checkLoad()
    }

    mutating func close() {
        pm_h2_free(session)
        session = nil
    }

    /// The load's counts agree with each other.
    func checkLoad() {
        var load = pm_h2_load()
        pm_h2_get_load(session, &load)
        precondition(load.waiting <= load.streams, "\(load.waiting) bodies waiting on \(load.streams) streams")
        precondition(
            (load.waiting == 0) == (load.waiting_bytes == 0), "waiting \(load.waiting), \(load.waiting_bytes) B")
        precondition(
            load.received_bytes <= load.streams * (64 * 1024 + bodyLimit), "\(load.received_bytes) B received")
    }

    /// An event's packed fields decode to the end with the shim's own decoder.
    func checkFields(_ event: pm_h2_event) {
        guard let packed = event.fields else { return }
        var offset = 0
        var field = pm_h2_field()
        var result: Int32 = 1
        while result == 1 { result = pm_h2_field_next(packed, event.fields_length, &offset, &field) }
        precondition(result == 0 && offset == event.fields_length, "fields cut at \(offset) of \(event.fields_length)")
    }

    /// `fields` as the shim takes them, valid during `body`.
    func withFields<Result>(
        _ fields: [(String, String)], _ body: (UnsafePointer<pm_h2_field>?, Int) -> Result
    ) -> Result {
        var bytes: [UInt8] = []
        var spans: [(start: Int, name: Int, value: Int)] = []
        for (name, value) in fields {
            let start = bytes.count
            bytes += Array(name.utf8)
            bytes += Array(value.utf8)
            spans.append((start, name.utf8.count, value.utf8.count))
        }
        return bytes.withUnsafeBufferPointer { storage in
            let views = spans.map { span in
                pm_h2_field(
                    name: storage.baseAddress! + span.start, value: storage.baseAddress! + span.start + span.name,
                    name_length: span.name, value_length: span.value, flags: 0)
            }
            return views.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
        }
    }
}
