import PushMedia

/// The bounds of the relays' listeners (`--relay-*`), part of `ServerConfig` as `relay`: what one
/// client connection may hold, and what all of a relay's connections may hold together. Past a
/// bound the offender is shed, not the others: a stream past its connection's bounds is refused
/// (`REFUSED_STREAM`, safe to send again); a connection whose answers go unread too long, or
/// that holds the most when a relay's totals pass theirs, gets `GOAWAY ENHANCE_YOUR_CALM` and is
/// closed; a connection past the relay's count is closed as it opens. Each is counted in
/// `pushmedia_relay_shed_total{relay,reason}`.
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
    /// `--relay-unread-timeout`: how long answers may wait for a client that reads nothing (its
    /// flow-control window closed, or its socket not read): 10 s.
    public var unreadTimeout: Duration = .seconds(10)
    /// How long a TLS handshake may take: 10 s.
    public var handshakeTimeout: Duration = .seconds(10)

    public init() {}

    /// The listeners' bounds, appended to `ServerConfig.settings`.
    static let settings: [Setting<ServerConfig>] = [
        .integer(
            "relay-max-connections", "PUSHMEDIA_RELAY_MAX_CONNECTIONS", \.relay.maxConnections, in: 1...1_000_000,
            commands: [.serve], default: "`1024`",
            help: "Client connections each relay holds at once; more are closed as they open"),
        .integer(
            "relay-max-streams", "PUSHMEDIA_RELAY_MAX_STREAMS", \.relay.maxStreams, in: 1...10_000_000,
            commands: [.serve], default: "`1024`",
            help: "Requests in flight across a relay's connections; past it the connection holding most is shed"),
        .integer(
            "relay-max-buffered", "PUSHMEDIA_RELAY_MAX_BUFFERED", \.relay.maxBuffered, in: 1_048_576...1 << 40,
            commands: [.serve], default: "`67108864`",
            help: "Bytes a relay holds for clients across its connections; past it the connection holding most is shed"),
        .integer(
            "relay-connection-streams", "PUSHMEDIA_RELAY_CONNECTION_STREAMS", \.relay.connectionStreams,
            in: 1...100_000, commands: [.serve], default: "`128`",
            help: "Requests in flight on one connection (reset ones included); more are refused (REFUSED_STREAM)"),
        .integer(
            "relay-connection-bytes", "PUSHMEDIA_RELAY_CONNECTION_BYTES", \.relay.connectionBytes,
            in: 65_536...1 << 36, commands: [.serve], default: "`8388608`",
            help: "Bytes one connection may hold; past it new requests on it are refused (REFUSED_STREAM)"),
        .duration(
            "relay-unread-timeout", "PUSHMEDIA_RELAY_UNREAD_TIMEOUT", \.relay.unreadTimeout, commands: [.serve],
            default: "`10s`",
            help: "How long answers may wait for a client that reads nothing before it is shed (GOAWAY)"),
    ]
}
