import NIOCore
import PushMedia

/// No reconnect storms: after a pool's connection fails to connect, its next connection waits
/// 250 ms, doubling with each failure in a row up to 30 s; pushes meanwhile fail at once (the
/// relays answer 503). A connection that connects clears it. Each new connection resolves the
/// host anew (SwiftNIO's bootstrap looks it up per connect).
final class ReconnectBackoff: Sendable {
    static let first: Duration = .milliseconds(250)
    static let most: Duration = .seconds(30)

    private struct Failing {
        var delay: Duration
        var until: ContinuousClock.Instant
    }
    private let pools = Locked<[String: Failing]>([:])

    /// Why `pool` takes no push now, or nil.
    func refusal(pool: String, now: ContinuousClock.Instant = .now) -> UpstreamFailure? {
        guard let failing = pools.withLock({ $0[pool] }), now < failing.until else { return nil }
        return .unreachable("connecting failed; next try in \((failing.until - now).reportedMilliseconds) ms")
    }

    /// Follows whether `connection` connects.
    func watch(_ connection: UpstreamConnection, pool: String) {
        connection.connected.whenSuccess { [self] connected in
            if connected { succeeded(pool: pool) } else { failed(pool: pool) }
        }
    }

    func failed(pool: String, now: ContinuousClock.Instant = .now) {
        pools.withLock { pools in
            let delay = pools[pool].map { min($0.delay * 2, Self.most) } ?? Self.first
            pools[pool] = Failing(delay: delay, until: now + delay)
        }
    }

    func succeeded(pool: String) {
        _ = pools.withLock { $0.removeValue(forKey: pool) }
    }
}
