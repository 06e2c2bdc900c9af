import CHTTP2Shim
import NIOCore
import PushMedia

/// What all of a relay's client connections hold together (`RelayLimits`'s totals), and what
/// each holds. Requests count from the moment they are handed to the endpoint until it answers,
/// whether or not their connection is still open (the work goes on, and holds memory, after a
/// client resets its stream or goes). Past a total the connection holding most is shed
/// (`RelayShed`), and new requests are refused on connections that hold more than a little;
/// a connection with a few requests in flight, as a legitimate sender has, is still served. It
/// also gives memory back once what held it is gone (`trimWhenQuiet`).
final class RelayBudget: Sendable {
    let limits: RelayLimits
    /// A connection holding less than this is served even past the totals.
    static let lightStreams = 8
    static let lightBytes = 256 * 1024
    private let onShed: @Sendable (_ reason: ShedReason) -> Void
    struct Usage {
        /// Requests in the endpoint's hands, and bytes held (theirs and the session's).
        var streams = 0
        var bytes = 0
        /// Bytes the session holds (requests being read, answers waiting, frames queued).
        var sessionBytes = 0
        var shed = false
        let shedNow: @Sendable (_ reason: ShedReason) -> Void
    }
    struct State {
        var connections: [ObjectIdentifier: Usage] = [:]
        /// Requests in the endpoints' hands, and their bytes plus what the open sessions hold.
        var streams = 0
        var bytes = 0
        /// Since memory was last given back: the most bytes held, and connections closed.
        var peakBytes = 0
        var closed = 0
        /// Turns of the trim timer left to give memory back again while quiet.
        var followUps = 0

        /// The open connection, not yet shed, holding most streams (or bytes); never one that
        /// holds only a little (see `lightStreams`).
        mutating func heaviest(byBytes: Bool) -> (ObjectIdentifier, Usage)? {
            var best: (ObjectIdentifier, Usage)?
            for (id, usage) in connections where !usage.shed && !RelayBudget.light(usage) {
                let measure = byBytes ? usage.bytes : usage.streams
                if measure > 0, measure > (best.map { byBytes ? $0.1.bytes : $0.1.streams } ?? 0) {
                    best = (id, usage)
                }
            }
            if let (id, _) = best { connections[id]?.shed = true }
            return best
        }
    }
    /// Readable by the tests (`totals`).
    let state = Locked(State())

    private static func light(_ usage: Usage) -> Bool {
        usage.streams < lightStreams && usage.bytes < lightBytes
    }

    init(limits: RelayLimits, onShed: @escaping @Sendable (_ reason: ShedReason) -> Void) {
        self.limits = limits
        self.onShed = onShed
    }

    /// Admits a new connection, false when the relay holds `maxConnections` already.
    func open(_ id: ObjectIdentifier, shed: @escaping @Sendable (_ reason: ShedReason) -> Void) -> Bool {
        state.withLock { state in
            guard state.connections.count < limits.maxConnections else { return false }
            state.connections[id] = Usage(shedNow: shed)
            return true
        }
    }

    /// A connection closed: what its session held is free (its requests in flight are not).
    func close(_ id: ObjectIdentifier) {
        state.withLock { state in
            guard let usage = state.connections.removeValue(forKey: id) else { return }
            state.bytes -= usage.sessionBytes
            state.closed += 1
        }
    }

    /// Counts one thing shed, by the bound that shed it.
    func count(_ reason: ShedReason) { onShed(reason) }

    /// A request of `bytes` on connection `id` is to be handed to the endpoint: nil when it may
    /// (then `finished` must follow once it is answered), or why not. Past a total, the
    /// connection holding most is shed, and this request is refused unless its connection holds
    /// only a little and is not the one shed.
    func admit(_ id: ObjectIdentifier, bytes: Int) -> ShedReason? {
        let (refusal, victim): (ShedReason?, (@Sendable (ShedReason) -> Void, ShedReason)?) = state.withLock { state in
            let overStreams = state.streams + 1 > limits.maxStreams
            let overBytes = state.bytes + bytes > limits.maxBuffered
            var victim: (@Sendable (ShedReason) -> Void, ShedReason)?
            if overStreams || overBytes {
                let reason: ShedReason = overBytes ? .buffered : .streams
                let heaviest = state.heaviest(byBytes: overBytes)
                victim = heaviest.map { ($0.1.shedNow, reason) }
                let light = state.connections[id].map(Self.light) ?? true
                if !light || heaviest?.0 == id { return (reason, victim) }
            }
            state.streams += 1
            state.bytes += bytes
            state.peakBytes = max(state.peakBytes, state.bytes)
            return (nil, victim)
        }
        if let (shed, reason) = victim {
            onShed(reason)
            shed(reason)
        }
        return refusal
    }

    /// An admitted request was answered (or its connection is gone and the work ended).
    func finished(bytes: Int) {
        state.withLock { state in
            state.streams -= 1
            state.bytes -= bytes
        }
    }

    /// What connection `id` holds now: requests in the endpoint's hands, the bytes it holds in
    /// all, and of those what its session holds. Past the bytes total (sessions grow too:
    /// requests being read, answers waiting), the connection holding most is shed.
    func update(_ id: ObjectIdentifier, streams: Int, bytes: Int, sessionBytes: Int) {
        let victim: (@Sendable (ShedReason) -> Void)? = state.withLock { state in
            guard var usage = state.connections[id] else { return nil }
            state.bytes += sessionBytes - usage.sessionBytes
            state.peakBytes = max(state.peakBytes, state.bytes)
            usage.streams = streams
            usage.bytes = bytes
            usage.sessionBytes = sessionBytes
            state.connections[id] = usage
            guard state.bytes > limits.maxBuffered else { return nil }
            return state.heaviest(byBytes: true)?.1.shedNow
        }
        if let victim {
            onShed(.buffered)
            victim(.buffered)
        }
    }

    /// Every 2 s, gives the allocator's free memory back to the system (`pm_trim_memory`, on
    /// `executor`: it may take a while) once what held much of it is gone: many connections
    /// closed, or the bytes held down to a quarter of a peak of 4 MiB or more; then again every
    /// 2 s for 30 s while it stays quiet, as what the gone connections' requests held is freed
    /// (their answers come from the upstream after them).
    func trimWhenQuiet(on eventLoop: any EventLoop, executor: BlockingExecutor) -> RepeatedTask {
        eventLoop.scheduleRepeatedTask(initialDelay: .seconds(2), delay: .seconds(2)) { _ in
            let trim = self.state.withLock { state in
                let quiet = state.bytes <= state.peakBytes / 4
                if quiet, state.closed >= 16 || state.peakBytes >= 4 * 1024 * 1024 {
                    state.closed = 0
                    state.peakBytes = state.bytes
                    state.followUps = 15
                    return true
                }
                guard state.followUps > 0 else { return false }
                state.followUps -= 1
                return quiet
            }
            if trim { executor.execute { pm_trim_memory() } }
        }
    }
}

/// Which bound of `RelayLimits` shed a connection or refused a stream: the `reason` label of
/// `pushmedia_relay_shed_total`.
package enum ShedReason: String, Sendable, CaseIterable {
    /// `--relay-max-connections`: a connection refused at once.
    case connections
    /// `--relay-connection-streams`, `--relay-connection-bytes`: a stream refused on its connection.
    case connectionStreams = "connection_streams"
    case connectionBytes = "connection_bytes"
    /// `--relay-max-streams`, `--relay-max-buffered`: the relay's totals.
    case streams
    case buffered
    /// `--relay-unread-timeout`: a client that reads none of its answers.
    case unread
    /// `--relay-handshake-timeout`: a TLS handshake or preface not finished in time.
    case handshake
    /// `--relay-request-timeout`: a request head not finished in time.
    case requestHead = "request_head"
    /// `--relay-max-empty-data`: a flood of empty DATA frames.
    case emptyData = "empty_data"
}
