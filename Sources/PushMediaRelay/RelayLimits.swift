import PushMedia

/// Every bound and timeout of the relays (`--relay-*`), part of `RelaysConfig` as `limits`: what
/// one client connection may hold, what all of a relay's connections may hold together, the
/// HTTP/2 settings both ends advertise, and how long each phase of a connection may take. Past
/// a bound the offender is shed, not the others: a stream past its connection's bounds is refused
/// (`REFUSED_STREAM`, safe to send again; 503 on HTTP/1.1); a connection whose answers go unread
/// too long, or that holds the most when a relay's totals pass theirs, gets `GOAWAY
/// ENHANCE_YOUR_CALM` and is closed; a connection past the relay's count is closed as it opens.
/// Each is counted in `pushmedia_relay_shed_total{relay,reason}`. All apply at start (a restart,
/// not SIGHUP, changes them).
public struct RelayLimits: Sendable, Equatable {
    /// `--relay-max-connections`: client connections a relay holds at once: 1024.
    public var maxConnections = 1024
    /// `--relay-max-streams`: requests in flight across a relay's connections: 1024.
    public var maxStreams = 1024
    /// `--relay-max-buffered`: bytes a relay holds for its clients across its connections
    /// (requests read and not yet answered, answers not yet sent): 64 MiB.
    public var maxBuffered = 64 * 1024 * 1024
    /// `--relay-connection-streams`: requests in flight on one connection, those the client reset
    /// included (also `SETTINGS_MAX_CONCURRENT_STREAMS`): 128.
    public var connectionStreams = 128
    /// `--relay-connection-bytes`: bytes one connection may hold: 8 MiB.
    public var connectionBytes = 8 * 1024 * 1024
    /// `--relay-max-body`: the largest request body read; a longer one is answered 413 at once:
    /// 64 KiB (Apple takes 4 KiB of payload, 5 KiB for VoIP; Google's messages are a little more).
    public var maxBody = 64 * 1024
    /// `--relay-max-header-list`: `SETTINGS_MAX_HEADER_LIST_SIZE` of both ends, and the most bytes
    /// of header fields kept per request or answer (a larger request is answered 431): 64 KiB.
    public var maxHeaderList = 64 * 1024
    /// `--relay-stream-window`: the flow-control window a client's stream starts with: 256 KiB.
    public var streamWindow = 256 * 1024
    /// `--relay-connection-window`: a client connection's flow-control window: 16 MiB.
    public var connectionWindow = 16 * 1024 * 1024
    /// `--relay-max-empty-data`: DATA frames of no length without END_STREAM a stream may carry
    /// before its connection gets `GOAWAY ENHANCE_YOUR_CALM` (CVE-2019-9518): 64.
    public var maxEmptyData = 64
    /// `--relay-unread-timeout`: how long answers may wait for a client that reads nothing (its
    /// flow-control window closed, or its socket not read): 10 s.
    public var unreadTimeout: Duration = .seconds(10)
    /// `--relay-handshake-timeout`: how long a new connection may take to deliver its first bytes
    /// (through TLS, its handshake done): 10 s.
    public var handshakeTimeout: Duration = .seconds(10)
    /// `--relay-request-timeout`: how long an HTTP/1.1 request may take to arrive whole, from
    /// its first byte: 10 s.
    public var requestTimeout: Duration = .seconds(10)
    /// `--relay-idle-timeout`: a connection silent this long is drained (its requests in flight
    /// answered, then closed): 10 minutes.
    public var idleTimeout: Duration = .seconds(600)
    /// `--relay-drain-timeout`: a connection asked to drain (idle, or the relay stopping) is
    /// closed this long after, whatever it still does: 60 s.
    public var drainTimeout: Duration = .seconds(60)
    /// `--relay-upstream-window`: the flow-control window of each stream to Apple or Google: 1 MiB.
    public var upstreamWindow = 1024 * 1024
    /// `--relay-upstream-ping`: an upstream connection silent this long is sent a `PING`: 1 hour
    /// (Apple's advice).
    public var upstreamPing: Duration = .seconds(3600)
    /// `--relay-fair-quantum`: what an app may send per turn of an upstream connection's fair
    /// queue (`FairQueue`), where a push costs 1 and 1 more per KiB: 4, about 4 ordinary pushes.
    /// Smaller keeps turns short, so a light app waits less behind a campaign's flood.
    public var fairQuantum = 4

    public init() {}

    /// The HTTP/2 of a client connection.
    var server: HTTP2Limits {
        HTTP2Limits(
            bodyLimit: maxBody, maxStreams: connectionStreams, maxHeaderList: maxHeaderList,
            streamWindow: streamWindow, connectionWindow: connectionWindow, maxEmptyData: maxEmptyData)
    }

    /// The HTTP/2 of an upstream connection: answers kept up to `maxBody`; the server pushes
    /// nothing, so the streams it may open are few.
    var client: HTTP2Limits {
        HTTP2Limits(
            bodyLimit: maxBody, maxStreams: 100, maxHeaderList: maxHeaderList, streamWindow: upstreamWindow,
            connectionWindow: max(connectionWindow, upstreamWindow), maxEmptyData: maxEmptyData,
            peerMaxStreamsInitial: 1)
    }

    /// The listeners' bounds, part of `RelaysConfig.settings`.
    static let settings: [Setting<RelaysConfig>] = [
        .integer(
            "relay-max-connections", "PUSHMEDIA_RELAY_MAX_CONNECTIONS", \.limits.maxConnections, in: 1...1_000_000,
            commands: [.serve], help: "Client connections each relay holds at once; more are closed as they open"),
        .integer(
            "relay-max-streams", "PUSHMEDIA_RELAY_MAX_STREAMS", \.limits.maxStreams, in: 1...10_000_000,
            commands: [.serve],
            help: "Requests in flight across a relay's connections; past it the connection holding most is shed"),
        .integer(
            "relay-max-buffered", "PUSHMEDIA_RELAY_MAX_BUFFERED", \.limits.maxBuffered, in: 1_048_576...1 << 40,
            commands: [.serve],
            help: "Bytes a relay holds for clients across its connections; past it the connection holding most is shed"),
        .integer(
            "relay-connection-streams", "PUSHMEDIA_RELAY_CONNECTION_STREAMS", \.limits.connectionStreams,
            in: 1...100_000, commands: [.serve],
            help: "Requests in flight on one connection (reset ones included); more are refused (REFUSED_STREAM)"),
        .integer(
            "relay-connection-bytes", "PUSHMEDIA_RELAY_CONNECTION_BYTES", \.limits.connectionBytes,
            in: 65_536...1 << 36, commands: [.serve],
            help: "Bytes one connection may hold; past it new requests on it are refused (REFUSED_STREAM)"),
        .integer(
            "relay-max-body", "PUSHMEDIA_RELAY_MAX_BODY", \.limits.maxBody, in: 5_120...16_777_216,
            commands: [.serve], help: "The largest request body read; a longer one is answered 413"),
        .integer(
            "relay-max-header-list", "PUSHMEDIA_RELAY_MAX_HEADER_LIST", \.limits.maxHeaderList, in: 4_096...1_048_576,
            commands: [.serve],
            help: "SETTINGS_MAX_HEADER_LIST_SIZE of both ends; a request with more header bytes is answered 431"),
        .integer(
            "relay-stream-window", "PUSHMEDIA_RELAY_STREAM_WINDOW", \.limits.streamWindow, in: 65_535...2_147_483_647,
            commands: [.serve], help: "The flow-control window of a client's stream"),
        .integer(
            "relay-connection-window", "PUSHMEDIA_RELAY_CONNECTION_WINDOW", \.limits.connectionWindow,
            in: 65_535...2_147_483_647, commands: [.serve], help: "The flow-control window of a client connection"),
        .integer(
            "relay-max-empty-data", "PUSHMEDIA_RELAY_MAX_EMPTY_DATA", \.limits.maxEmptyData, in: 1...1_000_000,
            commands: [.serve],
            help: "Empty DATA frames without END_STREAM one stream may carry before GOAWAY ENHANCE_YOUR_CALM"),
        .duration(
            "relay-unread-timeout", "PUSHMEDIA_RELAY_UNREAD_TIMEOUT", \.limits.unreadTimeout, commands: [.serve],
            help: "How long answers may wait for a client that reads nothing before it is shed (GOAWAY)"),
        .duration(
            "relay-handshake-timeout", "PUSHMEDIA_RELAY_HANDSHAKE_TIMEOUT", \.limits.handshakeTimeout,
            commands: [.serve],
            help: "How long a new connection may take to deliver its first bytes (through TLS) before it is closed"),
        .duration(
            "relay-request-timeout", "PUSHMEDIA_RELAY_REQUEST_TIMEOUT", \.limits.requestTimeout, commands: [.serve],
            help: "How long an HTTP/1.1 request may take to arrive whole, from its first byte"),
        .duration(
            "relay-idle-timeout", "PUSHMEDIA_RELAY_IDLE_TIMEOUT", \.limits.idleTimeout, commands: [.serve],
            help: "A client connection silent this long is drained (answered, then closed)"),
        .duration(
            "relay-drain-timeout", "PUSHMEDIA_RELAY_DRAIN_TIMEOUT", \.limits.drainTimeout, commands: [.serve],
            help: "A connection asked to drain is closed this long after, whatever it still does"),
        .integer(
            "relay-upstream-window", "PUSHMEDIA_RELAY_UPSTREAM_WINDOW", \.limits.upstreamWindow,
            in: 65_535...2_147_483_647, commands: [.serve],
            help: "The flow-control window of each stream to Apple or Google"),
        .duration(
            "relay-upstream-ping", "PUSHMEDIA_RELAY_UPSTREAM_PING", \.limits.upstreamPing, commands: [.serve],
            help: "An upstream connection silent this long is sent a PING"),
        .integer(
            "relay-fair-quantum", "PUSHMEDIA_RELAY_FAIR_QUANTUM", \.limits.fairQuantum, in: 1...1024,
            commands: [.serve],
            help: "What an app may send per turn of an upstream connection's fair queue (a push costs 1, and 1 per KiB)"
        ),
    ]
}
