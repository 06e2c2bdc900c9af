import Logging
import PostgresNIO
import PushMedia

/// A node's life in the fleet's database: one connection of its own, outside the pool (no pool
/// recycles it), that holds the advisory lock (`space`, its backend's pid) for as long as the
/// node lives and is heard. Leases and batch items record that pid, and count as held only
/// while the lock is:
/// - a node that dies loses the lock at once: its kernel closes the connection, and PostgreSQL
///   frees a session's advisory locks when the session ends;
/// - a node that is frozen (stopped, paused, its disk hung) or cut off says nothing: PostgreSQL
///   ends its session once it has been silent for `--fleet-node-timeout` (`idle_session_timeout`;
///   `tcp_user_timeout` and keepalives for a peer whose packets go nowhere). A live node speaks
///   every fifth of it.
///
/// Nodes waiting on a holder ask for the same lock, shared (`watch`): PostgreSQL grants it the
/// moment the holder's session ends, which wakes them without polling.
final class FleetLife: Sendable {
    /// The advisory locks' first key: "PM".
    static let space: Int32 = 0x504D

    /// SQL that is true while the life whose pid is in `column` holds its lock.
    static func alive(_ column: String) -> String {
        """
        EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = \(space) \
        AND objid = \(column)::oid AND objsubid = 2 AND granted AND mode = 'ExclusiveLock' \
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
        """
    }

    private let database: FleetDatabase
    private let logger: Logger
    /// The connection and its backend's pid while the lock is held; nil between lives.
    private let current = Locked<(connection: PostgresConnection, pid: Int)?>(nil)
    /// Set once `run` is cancelled: the lock is given up and not taken again.
    private let ended = Locked(false)
    /// Ends the current life's heartbeat at once (its connection failed a statement).
    private let lostSignal = Locked<OnceResolver<Void>?>(nil)

    init(database: FleetDatabase, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// The pid under which this node holds leases now; nil while it holds no life (the
    /// database is out, or the connection is being made again).
    var pid: Int? { current.withLock { $0?.pid } }

    /// Ends the life whose pid is `pid`, if it is the current one: the database no longer holds
    /// its lock (a claim found so).
    func lose(pid: Int) {
        if let connection = current.withLock({ $0?.pid == pid ? $0?.connection : nil }) { lose(connection) }
    }

    /// The pid now, or the one a life begins with within `limit` (a node just started, or one
    /// connecting again); nil when there is none by then.
    func current(within limit: Duration) async -> Int? {
        let until = ContinuousClock.now + limit
        while true {
            if let pid { return pid }
            guard ContinuousClock.now < until, !Task.isCancelled else { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Holds the lock while the process runs: connects, takes it, speaks every fifth of the node
    /// timeout, and connects again at once when the connection is lost (its leases are lost with
    /// it: a fencing check then says so). Returns when cancelled, closing the connection, which
    /// hands every lease over at once.
    func run() async {
        let every = database.nodeTimeout / 5
        while !Task.isCancelled {
            if let (connection, _) = try? await begin() {
                let lost = OnceResolver<Void>()
                lostSignal.withLock { $0 = lost }
                // Speaks until a statement fails, or until the life is found lost elsewhere.
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        while !Task.isCancelled {
                            try? await Task.sleep(for: every)
                            guard !Task.isCancelled else { return }
                            let spoke = try? await withDeadline(self.database.nodeTimeout / 2) {
                                try await connection.query("SELECT 1", logger: self.logger)
                                return true
                            }
                            if spoke != true { return }
                        }
                    }
                    group.addTask { await lost.value() }
                    await group.next()
                    lost.resolve(())
                    group.cancelAll()
                }
                current.withLock { $0 = nil }
                // Not waited for: a connection the server ended while this process was stopped
                // may take its time to close, and a new life begins at once.
                Task { try? await connection.close() }
                continue
            }
            guard !Task.isCancelled else { break }
            try? await Task.sleep(for: .milliseconds(250))
        }
        end()
    }

    /// Closes the connection (a clean stop): the other nodes take the leases over at once.
    func end() {
        ended.withLock { $0 = true }
        let connection = current.withLock { state in
            defer { state = nil }
            return state?.connection
        }
        if let connection {
            Task { try? await connection.close() }
        }
    }

    /// A new connection with the lock taken (a pid whose lock is still held, by a watcher of a
    /// node that had it before, is given up for another connection).
    private func begin() async throws -> (PostgresConnection, Int) {
        let connection = try await database.connect(logger: logger)
        do {
            let ms = "\(database.nodeTimeout.nanoseconds / 1_000_000)"
            let idle = "\(max(1, database.nodeTimeout.nanoseconds / 5_000_000_000))"
            let rows = try await withDeadline(max(database.timeout, .seconds(5))) {
                try await connection.query(
                    """
                    SELECT pg_backend_pid()::int8, pg_try_advisory_lock(\(Self.space), pg_backend_pid()),
                        set_config('idle_session_timeout', \(ms), false),
                        set_config('tcp_user_timeout', \(ms), false),
                        set_config('tcp_keepalives_idle', \(idle), false),
                        set_config('tcp_keepalives_interval', \(idle), false),
                        set_config('tcp_keepalives_count', '4', false)
                    """, logger: self.logger
                ).collect()
            }
            guard let row = rows.first else { throw FleetError.statement(database.described, why: "no answer") }
            let (pid, locked, _, _, _, _, _) = try row.decode((Int, Bool, String, String, String, String, String).self)
            guard locked else { throw FleetError.statement(database.described, why: "the node's lock is taken") }
            let kept = current.withLock { state -> Bool in
                guard !ended.withLock({ $0 }) else { return false }
                state = (connection, pid)
                return true
            }
            guard kept else { throw CancellationError() }
            return (connection, pid)
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Whether this life still holds `key`'s lease of `epoch`: asked on the life connection
    /// itself, so that the answer also says its lock is held.
    func holds(key: String, epoch: Int64) async -> LeaseCheck {
        // Between lives, or the life's connection failed: the lease went with that life if the
        // database is there (another node may hold it now); if it is out, nobody can.
        guard let (connection, _) = current.withLock({ $0 }) else { return await withoutLife() }
        do {
            let rows = try await withDeadline(database.timeout) {
                try await connection.query(
                    """
                    SELECT count(*)::int8 FROM pushmedia_leases
                    WHERE key = \(key) AND epoch = \(epoch) AND holder_pid = pg_backend_pid() AND state = 'running'
                    """, logger: self.logger
                ).collect()
            }
            let count = try rows.first?.decode(Int.self) ?? 0
            return count == 1 ? .held : .lost
        } catch {
            // Failed, or silent past `--fleet-db-timeout` while the database answers others: the
            // life is not to be trusted with a lease any more.
            let check = await withoutLife()
            if check == .lost { lose(connection) }
            return check
        }
    }

    /// The life on `connection` is over (a statement on it failed): no lease is claimed under its
    /// pid any more, and a new life begins at once.
    func lose(_ connection: PostgresConnection) {
        let lost = current.withLock { state -> Bool in
            guard let held = state, held.connection === connection else { return false }
            state = nil
            return true
        }
        if lost { lostSignal.withLock { $0 }?.resolve(()) }
    }

    /// `lost` when the database answers a new connection within `--fleet-db-timeout`, else `unknown`.
    private func withoutLife() async -> LeaseCheck {
        guard let connection = try? await database.connect(logger: logger) else { return .unknown }
        try? await connection.close()
        return .lost
    }

    /// Waits until the life of `pid` has ended (its lock is granted shared here), on a connection
    /// of its own; `connected` receives it, so that a watch no longer needed can be closed.
    /// Returns true when the life ended, false when the connection failed or was closed.
    func watch(_ pid: Int, connected: @Sendable (PostgresConnection) -> Void) async -> Bool {
        guard let connection = try? await database.connect(logger: logger) else { return false }
        connected(connection)
        defer { Task { try? await connection.close() } }
        do {
            try await connection.query(
                "SELECT pg_advisory_lock_shared(\(Self.space), \(pid)::int4)", logger: logger)
            return true
        } catch {
            return false
        }
    }
}
