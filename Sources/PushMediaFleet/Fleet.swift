import CoreMetrics
import Foundation
import Logging
import PostgresNIO
import PushMedia
import ServiceLifecycle
import Tracing

/// The nodes on one store as one: a lease per cache key in PostgreSQL (`INSERT … ON CONFLICT`)
/// so that one node makes each media, `LISTEN`/`NOTIFY` so that the others hear at once how it
/// ended and every node drops a purged entry from memory. A lease is tied to its holder's life
/// (`FleetLife`): a dead holder's lease is taken over the moment PostgreSQL frees its lock (the
/// waiting nodes watch the lock), a frozen one's once `--fleet-node-timeout` has passed, and
/// `--fleet-lease` (renewed while the job runs) is the bound when neither is known. Each lease
/// carries a fencing token: a holder taken for dead records nothing. When the database does not
/// answer within `--fleet-db-timeout`, each claim answers `unavailable` (the job is shared per
/// node) for a second before the database is tried again; a warning says so once per outage.
public final class Fleet: JobCoordinator, Service {
    public let database: FleetDatabase
    /// This node's name in the leases it holds.
    public let node: String
    /// How long a lease lasts without renewal (`--fleet-lease`).
    public let lease: Duration
    /// Which of this node's work that no caller sent (batch items, purges heard) begins a trace.
    let sampler: TraceSampler?
    private let client: PostgresClient
    private let logger: Logger
    /// This node's life in the database: the pid its leases are held under.
    let life: FleetLife
    /// Waiters for other nodes' jobs, by cache key.
    let waiters = Locked<[String: [ObjectIdentifier: Waiter]]>([:])
    /// The watches on the lives of the holders this node waits for, by their pid: the
    /// connection each waits on, once made (closed when nobody waits on that holder any more).
    let watches = Locked<[Int: PostgresConnection?]>([:])
    /// The most holders watched at once (a connection each); waiters on others wait for the
    /// lease's word or its expiry.
    static let watchLimit = 32
    /// Whether this node hears the channel: without it, a wait is a short poll.
    private let listening = Locked(false)
    /// Until when claims skip the database (it failed a moment ago), and whether the outage was told.
    private let outage = Locked<(until: ContinuousClock.Instant?, told: Bool)>((nil, false))
    /// What a purge notification does here (drop the entry from memory).
    private let purged: (@Sendable (String) -> Void)?
    /// Its counters, when it has somewhere to count.
    let metrics: FleetMetrics?
    /// Set once `run` is cancelled: statements failing then are the pool closing, not an outage.
    private let stopping = Locked(false)

    /// The fleet on `database`, for jobs whose leases last `lease` (renewed every third of it).
    /// `sampler` decides which purges heard from other nodes begin a trace (nil: traces off);
    /// its counters go to `metrics` (none without), and a purge heard from another node calls
    /// `onPurge` with the key (the store forgets its entry).
    public init(
        database: FleetDatabase, lease: Duration, sampler: TraceSampler? = nil, metrics: (any MetricsFactory)? = nil,
        onPurge: (@Sendable (String) -> Void)? = nil, logger: Logger
    ) throws(FleetError) {
        self.database = database
        self.lease = lease
        self.sampler = sampler
        self.metrics = metrics.map { FleetMetrics(factory: $0) }
        purged = onPurge
        self.logger = logger
        let host = ProcessInfo.processInfo.hostName
        node = "\(host)-\(getpid())-\(UInt32.random(in: 0...UInt32.max) & 0xffff)"
        // The pool's own lines (every failed attempt to connect) are left out: the fleet says
        // once when the database goes away and once when it is back.
        var quiet = logger
        quiet.logLevel = .critical
        client = PostgresClient(configuration: try database.clientConfiguration(), backgroundLogger: quiet)
        life = FleetLife(database: database, logger: quiet)
    }

    /// The pool and the listener, until the process stops.
    public func run() async throws {
        await withTaskCancellationHandler {
            await cancelWhenGracefulShutdown {
                await withDiscardingTaskGroup { group in
                    group.addTask { await self.client.run() }
                    group.addTask { await self.life.run() }
                    group.addTask { await self.listen() }
                    group.addTask { await self.sweep() }
                }
            }
        } onCancel: {
            stopping.withLock { $0 = true }
            life.end()
        }
        stopping.withLock { $0 = true }
    }

    // MARK: Leases

    public func claim(_ key: String) async -> FleetClaim { await claim(key, firstLife: true) }

    private func claim(_ key: String, firstLife: Bool) async -> FleetClaim {
        // A node without a life (just started, or connecting again) waits for one a moment
        // (`--fleet-db-timeout`); without one then, jobs are shared per node for a second.
        guard available() else { return .unavailable }
        guard let pid = await life.current(within: database.timeout) else {
            unavailable(FleetError.unreachable(database.described, why: "the node's own connection is not open"))
            return .unavailable
        }
        let resolver = OnceResolver<FleetJobEnd?>()
        let id = ObjectIdentifier(resolver)
        waiters.withLock { $0[key, default: [:]][id] = Waiter(resolver: resolver) }
        let seconds = Double(lease.nanoseconds) / 1e9
        let node = self.node
        let started = ContinuousClock.now
        let row: Claimed?
        do {
            // A running lease is taken over once it expired, or once its holder's life ended.
            row = try await statement { client in
                let rows = try await client.query(
                    """
                    WITH me AS (SELECT \(unescaped: FleetLife.alive("\(pid)")) AS alive),
                    taken AS (
                        INSERT INTO pushmedia_leases AS l (key, holder, holder_pid, epoch, expires, state)
                        SELECT \(key), \(node), \(pid), nextval('pushmedia_lease_epochs'),
                            now() + make_interval(secs => \(seconds)), 'running'
                        FROM me WHERE me.alive
                        ON CONFLICT (key) DO UPDATE
                            SET holder = EXCLUDED.holder, holder_pid = EXCLUDED.holder_pid, epoch = EXCLUDED.epoch,
                                expires = EXCLUDED.expires, state = 'running', reason = '', message = ''
                            WHERE CASE WHEN l.expires < now() THEN true WHEN l.state <> 'running' THEN false
                                ELSE NOT \(unescaped: FleetLife.alive("l.holder_pid")) END
                        RETURNING 'taken'::text AS state, ''::text AS reason, ''::text AS message,
                            (SELECT p.state FROM pushmedia_leases p WHERE p.key = l.key) AS previous,
                            l.epoch, l.holder_pid::int8 AS holder_pid)
                    SELECT state, reason, message, previous, epoch, holder_pid FROM taken
                    UNION ALL
                    SELECT state, reason, message, NULL, epoch, holder_pid::int8 FROM pushmedia_leases
                    WHERE key = \(key) AND NOT EXISTS (SELECT 1 FROM taken) AND (SELECT alive FROM me)
                    UNION ALL
                    SELECT 'lifeless', '', '', NULL, 0, 0 WHERE NOT (SELECT alive FROM me)
                    """)
                var found: Claimed?
                for try await row in rows.decode((String, String, String, String?, Int64, Int).self) {
                    found = Claimed(
                        state: row.0, reason: row.1, message: row.2, previous: row.3, epoch: row.4, holder: row.5)
                }
                return found
            }
        } catch {
            forget(key, id)
            return .unavailable
        }
        let counters = metrics
        counters?.roundTrip.recordNanoseconds(started.duration(to: .now).nanoseconds)
        switch row?.state {
        case "lifeless"?:
            // This node's life ended without its knowing (its connection was ended while it
            // was frozen): a new one begins, and the job is claimed under it.
            forget(key, id)
            life.lose(pid: pid)
            return firstLife ? await claim(key, firstLife: false) : .unavailable
        case "taken"?:
            forget(key, id)
            let handover = row?.previous == "running"
            counters?.lease(handover ? "expired" : "taken")
            if handover { counters?.handovers.increment() }
            return .held(renewing(key, epoch: row?.epoch ?? 0))
        case "made"?:
            forget(key, id)
            counters?.lease("ended")
            return .ended(.made)
        case "failed"?:
            forget(key, id)
            counters?.lease("ended")
            return .ended(.failed(reason: row?.reason ?? "", message: row?.message ?? ""))
        case "abandoned"?:
            // Given up a moment ago (the next claim takes it): made here.
            forget(key, id)
            return .ended(.abandoned)
        default:
            // Running elsewhere (or taken by another node within this very statement).
            counters?.lease("waited")
            if let holder = row?.holder, holder != 0 { watch(holder, for: key, id) }
            let listening = self.listening
            return .elsewhere(
                FleetWait { [weak self] until in
                    let until = listening.withLock { $0 } ? until : min(until, .now + .milliseconds(250))
                    let timer = Task {
                        try? await Task.sleep(until: until, clock: .continuous)
                        resolver.resolve(nil)
                    }
                    let waited = ContinuousClock.now
                    let end = await resolver.value()
                    timer.cancel()
                    counters?.leaseWait.recordNanoseconds(waited.duration(to: .now).nanoseconds)
                    self?.forget(key, id)
                    return end
                })
        }
    }

    public func finish(_ lease: FleetLease, _ end: FleetJobEnd) async {
        lease.stopRenewing()
        let (state, reason, message): (String, String, String) =
            switch end {
            case .made: ("made", "", "")
            case let .failed(reason, message): ("failed", reason, String(message.prefix(1000)))
            case .abandoned: ("abandoned", "", "")
            }
        // An ended lease stays one lease period, so that a node whose store lookup missed just
        // before the entry was written reads the store instead of making the media again.
        let keep = end == .abandoned ? 0 : Double(self.lease.nanoseconds) / 1e9
        let payload = ["end", lease.key, state, reason, Self.oneLine(message)].joined(separator: "\t")
        let (key, node, epoch) = (lease.key, self.node, lease.epoch)
        _ = try? await statement { client in
            try await client.query(
                """
                WITH ended AS (
                    UPDATE pushmedia_leases
                    SET state = \(state), reason = \(reason), message = \(message),
                        expires = now() + make_interval(secs => \(keep))
                    WHERE key = \(key) AND holder = \(node) AND epoch = \(epoch)
                    RETURNING 1)
                SELECT pg_notify(\(FleetDatabase.channel), \(payload)) FROM ended
                """)
        }
    }

    /// A held lease whose expiry moves on every third of its period until it is finished.
    private func renewing(_ key: String, epoch: Int64) -> FleetLease {
        let (node, seconds) = (self.node, Double(lease.nanoseconds) / 1e9)
        let every = lease / 3
        let renewal = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                guard !Task.isCancelled, let self else { return }
                _ = try? await self.statement { client in
                    try await client.query(
                        """
                        UPDATE pushmedia_leases SET expires = now() + make_interval(secs => \(seconds))
                        WHERE key = \(key) AND holder = \(node) AND epoch = \(epoch) AND state = 'running'
                        """)
                }
            }
        }
        let (life, metrics) = (self.life, self.metrics)
        return FleetLease(
            key: key, epoch: epoch, stopRenewing: { renewal.cancel() },
            confirm: {
                let check = await life.holds(key: key, epoch: epoch)
                if check == .lost { metrics?.fenced.increment() }
                return check
            })
    }

    // MARK: Purges

    /// Tells every node of the fleet on `database` to drop `keys` from memory, and ends their
    /// leases (a purged media is made again by the next request): `pushmedia purge`.
    /// The notification is in a span (`pushmedia.fleet.purge`) when `sampler` records it.
    public static func announcePurge(_ keys: [String], on database: FleetDatabase, sampler: TraceSampler? = nil)
        async throws(FleetError)
    {
        guard !keys.isEmpty else { return }
        let logger = Logger(label: "pushmedia")
        let connection = try await database.connect(logger: logger, timeout: max(database.timeout, .seconds(5)))
        defer { Task { try? await connection.close() } }
        // The NOTIFY in its span (`pushmedia.fleet.purge`), with the number of keys.
        let span = sampler?.start("pushmedia.fleet.purge", ofKind: .producer)
        span?.setAttribute("pushmedia.fleet.keys", keys.count)
        defer { span?.end() }
        do {
            try await connection.query("DELETE FROM pushmedia_leases WHERE key = ANY(\(keys))", logger: logger)
            try await connection.query(
                "SELECT pg_notify(\(FleetDatabase.channel), 'purge' || chr(9) || k) FROM unnest(\(keys)::text[]) k",
                logger: logger)
        } catch {
            span?.setStatus(SpanStatus(code: .error, message: "the fleet database failed"))
            throw database.classify(error)
        }
    }

    // MARK: The channel

    /// Listens on the channel while the process runs, connecting again a second after a loss.
    private func listen() async {
        while !Task.isCancelled {
            do {
                let connection = try await database.connect(logger: logger)
                do {
                    try await connection.listen(on: FleetDatabase.channel) { notifications in
                        listening.withLock { $0 = true }
                        recovered()
                        for try await notification in notifications { heard(notification.payload) }
                    }
                } catch {}
                try? await connection.close()
            } catch {
                unavailable(error)
            }
            lost()
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// A notification: a job's end (wakes this node's waiters for the key) or a purge.
    private func heard(_ payload: String) {
        let fields = payload.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        let counters = metrics
        switch fields.first {
        case "end"? where fields.count == 5:
            counters?.notification("end")
            let end: FleetJobEnd =
                switch fields[2] {
                case "made": .made
                case "failed": .failed(reason: fields[3], message: fields[4])
                default: .abandoned
                }
            let woken = waiters.withLock { $0.removeValue(forKey: fields[1]) } ?? [:]
            for waiter in woken.values { waiter.resolver.resolve(end) }
            unwatchIdle()
        case "purge"? where fields.count == 2:
            counters?.notification("purge")
            // A span of its own: the purge was sent by another process, which sends no context.
            let span = sampler?.start("pushmedia.fleet.purge_heard", ofKind: .consumer)
            purged?(fields[1])
            span?.end()
        default:
            logger.warning(
                "fleet: an unknown notification on the channel", metadata: ["bytes": "\(payload.utf8.count)"])
        }
    }

    /// The channel was lost: every waiter claims again (and runs the job here while the
    /// database is down).
    private func lost() {
        listening.withLock { $0 = false }
        let all = waiters.withLock { waiters in
            defer { waiters.removeAll() }
            return waiters.values.flatMap(\.values)
        }
        for waiter in all { waiter.resolver.resolve(nil) }
        unwatchIdle()
    }

    private func forget(_ key: String, _ id: ObjectIdentifier) {
        waiters.withLock { waiters in
            waiters[key]?.removeValue(forKey: id)
            if waiters[key]?.isEmpty == true { waiters.removeValue(forKey: key) }
        }
        unwatchIdle()
    }

    /// Removes leases ended over an hour ago, every ten minutes.
    private func sweep() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(600))
            _ = try? await statement { client in
                try await client.query("DELETE FROM pushmedia_leases WHERE expires < now() - interval '1 hour'")
            }
        }
    }

    // MARK: The batch queue's depth

    /// Counts the fleet batches' items waiting and being worked on, for the metrics
    /// (`pushmedia_fleet_queue_items{state="queued|working"}`), in the background: called as
    /// `/metrics` is read, at most once every `queueDepthInterval`, so the numbers are at most one
    /// scrape old and a node that nobody scrapes asks nothing. Skipped while the database is out.
    public func refreshQueueDepth() {
        guard let metrics, available() else { return }
        let due = queueDepthAsked.withLock { last in
            let now = ContinuousClock.now
            guard last.map({ now - $0 >= Self.queueDepthInterval }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        Task {
            let logger = self.logger
            guard
                let (queued, working) = try? await statement(
                    timeout: max(database.timeout, .seconds(5)),
                    { client in
                        let rows = try await client.query(
                            """
                            SELECT count(*) FILTER (WHERE state = 'queued' OR expires < now())::int8,
                                count(*) FILTER (WHERE state = 'taken' AND expires >= now())::int8
                            FROM pushmedia_batch_items WHERE state <> 'done'
                            """, logger: logger)
                        var counts = (0, 0)
                        for try await row in rows.decode((Int, Int).self) { counts = row }
                        return counts
                    })
            else { return }
            metrics.queue(queued: queued, working: working)
        }
    }

    /// The least time between two counts of the queue.
    static let queueDepthInterval: Duration = .seconds(5)
    private let queueDepthAsked = Locked<ContinuousClock.Instant?>(nil)

    // MARK: Availability

    /// Runs `work` on the pool within the timeout; a failure opens a second without the database.
    /// A caller that was cancelled (its task ended, the server stopping) says nothing of the database.
    private func statement<T: Sendable>(
        timeout: Duration? = nil, _ work: @escaping @Sendable (PostgresClient) async throws -> T
    ) async throws -> T {
        do {
            let client = self.client
            let result = try await withDeadline(timeout ?? database.timeout) { try await work(client) }
            recovered()
            return result
        } catch {
            if !Task.isCancelled { unavailable(error) }
            throw error
        }
    }

    private func available() -> Bool {
        outage.withLock { state in
            guard let until = state.until else { return true }
            return ContinuousClock.now >= until
        }
    }

    private func unavailable(_ error: any Error) {
        guard !stopping.withLock({ $0 }) else { return }
        let tell = outage.withLock { state in
            state.until = .now + .seconds(1)
            defer { state.told = true }
            return !state.told
        }
        metrics?.unavailable.increment()
        if tell {
            logger.warning(
                "fleet database unavailable: jobs are shared per node until it is back",
                metadata: ["database": "\(database.described)", "error": "\(database.classify(error))"])
        }
    }

    private func recovered() {
        let wasDown = outage.withLock { state in
            defer { state = (nil, false) }
            return state.told
        }
        if wasDown { logger.info("fleet database back: jobs are shared by the fleet again") }
    }

    /// A message on one line, without the separator of the notification's fields.
    static func oneLine(_ text: String) -> String {
        String(text.prefix(1000).map { $0 == "\t" || $0.isNewline ? " " : $0 })
    }
}
