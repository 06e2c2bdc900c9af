import Foundation
import Logging
import PostgresNIO
import PushMedia

/// A batch's items in the fleet's database, taken by any number of workers with
/// `SELECT … FOR UPDATE SKIP LOCKED`: each item is held by one worker at a time under a lease
/// (renewed while it works), done once (a result is kept only from the worker that holds it),
/// and an item whose worker died goes back to the queue when its lease lapses.
public final class FleetQueue: Sendable {
    /// One payload file of a batch.
    public struct Item: Sendable {
        public let number: Int
        /// Its path under the batch's folder.
        public let file: String
        public let payload: [UInt8]
    }

    /// A done item: the rewritten payload (nil: none) and the outcome's JSON.
    public struct Result: Sendable {
        public let number: Int
        public let file: String
        public let output: [UInt8]?
        public let outcome: [UInt8]
    }

    /// Where a batch is.
    public struct Progress: Sendable {
        public let name: String
        /// The folder it was read from (where its local media references resolve).
        public let input: String
        public let total: Int
        public let done: Int
        /// Held by a worker now.
        public let working: Int
        /// From its creation to its last item's end (or to now).
        public let seconds: Double
        public var finished: Bool { done == total }
    }

    /// The largest payload file a batch takes (a payload is a few KB; APNs takes 4 KB).
    public static let payloadLimit = 1 << 20
    /// Items written in one statement.
    static let chunk = 500

    public let database: FleetDatabase
    let connection: PostgresConnection
    let logger: Logger

    private init(database: FleetDatabase, connection: PostgresConnection, logger: Logger) {
        self.database = database
        self.connection = connection
        self.logger = logger
    }

    /// The queue on `database`, its tables checked.
    public static func open(_ database: FleetDatabase, logger: Logger) async throws(FleetError) -> FleetQueue {
        try await database.check(logger: logger)
        let connection = try await database.connect(logger: logger, timeout: max(database.timeout, .seconds(5)))
        return FleetQueue(database: database, connection: connection, logger: logger)
    }

    public func close() async { try? await connection.close() }

    /// Runs `statement`, its errors as `FleetError`.
    @discardableResult
    private func run<T>(_ statement: (PostgresConnection) async throws -> T) async throws(FleetError) -> T {
        do { return try await statement(connection) } catch { throw database.classify(error) }
    }

    /// Creates the batch `name` of `items`, read from `input`. A name in use is refused.
    public func enqueue(name: String, input: String, items: [(file: String, payload: [UInt8])]) async throws(FleetError)
    {
        let logger = self.logger
        try await run { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                let rows = try await connection.query(
                    """
                    INSERT INTO pushmedia_batches (name, input, items) VALUES (\(name), \(input), \(items.count))
                    ON CONFLICT (name) DO NOTHING RETURNING name
                    """, logger: logger)
                var created = false
                for try await _ in rows { created = true }
                guard created else { throw FleetError.statement(database.described, why: "the batch \(name) exists") }
                for start in stride(from: 0, to: items.count, by: Self.chunk) {
                    let part = items[start..<min(items.count, start + Self.chunk)]
                    let numbers = part.indices.map { $0 }
                    let files = part.map(\.file)
                    let payloads = part.map { Data($0.payload).base64EncodedString() }
                    try await connection.query(
                        """
                        INSERT INTO pushmedia_batch_items (batch, item, file, payload)
                        SELECT \(name), n::integer, f, p FROM unnest(\(numbers)::int8[], \(files)::text[], \(payloads)::text[])
                            AS t (n, f, p)
                        """, logger: logger)
                }
                try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// SQL true for an item no worker holds: queued, or taken by a worker whose lease lapsed or
    /// whose life ended (`FleetLife`: it died, or froze past `--fleet-node-timeout`).
    static let free = """
        (state = 'queued' OR (state = 'taken' AND (expires < now() OR NOT \(FleetLife.alive("holder_pid")))))
        """

    /// Takes up to `count` items of `name` that no worker holds (`free`), for `holder` under its
    /// life's pid `life`, for `lease`. The locking select is a materialized CTE: as a
    /// subquery the planner may run it again per row, and with SKIP LOCKED each run finds
    /// other rows (one worker would take them all).
    public func take(name: String, holder: String, life: Int, count: Int, lease: Duration) async throws(FleetError)
        -> [Item]
    {
        let (logger, seconds) = (self.logger, Double(lease.nanoseconds) / 1e9)
        return try await run { connection in
            let rows = try await connection.query(
                """
                WITH s AS MATERIALIZED (
                    SELECT item FROM pushmedia_batch_items
                    WHERE batch = \(name) AND \(unescaped: Self.free)
                    ORDER BY item LIMIT \(count) FOR UPDATE SKIP LOCKED)
                UPDATE pushmedia_batch_items AS t
                SET state = 'taken', holder = \(holder), holder_pid = \(life),
                    expires = now() + make_interval(secs => \(seconds))
                FROM s WHERE t.batch = \(name) AND t.item = s.item
                RETURNING t.item, t.file, t.payload
                """, logger: logger)
            var items: [Item] = []
            for try await (number, file, payload) in rows.decode((Int, String, String).self) {
                items.append(Item(number: number, file: file, payload: Array(Data(base64Encoded: payload) ?? Data())))
            }
            return items.sorted { $0.number < $1.number }
        }
    }

    /// The oldest batch with an item no worker holds (`free`): its name and
    /// where it was read from; nil when every batch is done or held.
    public func batchWithWork() async throws(FleetError) -> (name: String, input: String)? {
        let logger = self.logger
        return try await run { connection in
            let rows = try await connection.query(
                """
                SELECT b.name, b.input FROM pushmedia_batches b
                WHERE EXISTS (
                    SELECT 1 FROM pushmedia_batch_items
                    WHERE batch = b.name AND \(unescaped: Self.free))
                ORDER BY b.created, b.name LIMIT 1
                """, logger: logger)
            var found: (name: String, input: String)?
            for try await (name, input) in rows.decode((String, String).self) { found = (name, input) }
            return found
        }
    }

    /// Moves the lease of `holder`'s items on.
    public func renew(name: String, holder: String, lease: Duration) async throws(FleetError) {
        let (logger, seconds) = (self.logger, Double(lease.nanoseconds) / 1e9)
        try await run { connection in
            try await connection.query(
                """
                UPDATE pushmedia_batch_items SET expires = now() + make_interval(secs => \(seconds))
                WHERE batch = \(name) AND holder = \(holder) AND state = 'taken'
                """, logger: logger)
        }
    }

    /// Records an item's result; false when `holder` no longer holds it (its lease lapsed and
    /// another worker took it): that worker's result counts.
    public func complete(name: String, number: Int, holder: String, output: [UInt8]?, outcome: [UInt8])
        async throws(FleetError) -> Bool
    {
        let logger = self.logger
        let output = output.map { Data($0).base64EncodedString() }
        let outcome = String(decoding: outcome, as: UTF8.self)
        return try await run { connection in
            let rows = try await connection.query(
                """
                UPDATE pushmedia_batch_items
                SET state = 'done', output = \(output), outcome = \(outcome), expires = NULL, finished = now()
                WHERE batch = \(name) AND item = \(number) AND holder = \(holder) AND state = 'taken'
                RETURNING item
                """, logger: logger)
            var kept = false
            for try await _ in rows { kept = true }
            return kept
        }
    }

    /// Where the batch `name` is; nil when there is none.
    public func progress(name: String) async throws(FleetError) -> Progress? {
        let logger = self.logger
        return try await run { connection in
            let rows = try await connection.query(
                """
                SELECT b.input, b.items,
                    count(*) FILTER (WHERE i.state = 'done')::int8,
                    count(*) FILTER (WHERE i.state = 'taken' AND i.expires >= now())::int8,
                    extract(epoch FROM coalesce(
                        CASE WHEN count(*) FILTER (WHERE i.state <> 'done') = 0 THEN max(i.finished) END, now())
                        - b.created)::float8
                FROM pushmedia_batches b LEFT JOIN pushmedia_batch_items i ON i.batch = b.name
                WHERE b.name = \(name) GROUP BY b.name, b.input, b.items, b.created
                """, logger: logger)
            var found: Progress?
            for try await (input, total, done, working, seconds) in rows.decode((String, Int, Int, Int, Double).self) {
                found = Progress(
                    name: name, input: input, total: total, done: done, working: working, seconds: seconds)
            }
            return found
        }
    }

    /// Deletes the batch `name` and its items, done or not: the number of items it had, nil when
    /// there was no such batch. A worker still on it finds nothing more to take and stops; a
    /// result it records after this is dropped (it holds no item).
    public func delete(name: String) async throws(FleetError) -> Int? {
        let logger = self.logger
        return try await run { connection in
            let rows = try await connection.query(
                "DELETE FROM pushmedia_batches WHERE name = \(name) RETURNING items", logger: logger)
            var items: Int?
            for try await (count) in rows.decode(Int.self) { items = count }
            return items
        }
    }

    /// Every done item of `name`, in order.
    public func results(name: String) async throws(FleetError) -> [Result] {
        let logger = self.logger
        return try await run { connection in
            let rows = try await connection.query(
                """
                SELECT item, file, output, outcome FROM pushmedia_batch_items
                WHERE batch = \(name) AND state = 'done' ORDER BY item
                """, logger: logger)
            var results: [Result] = []
            for try await (number, file, output, outcome) in rows.decode((Int, String, String?, String).self) {
                results.append(
                    Result(
                        number: number, file: file,
                        output: output.flatMap { Data(base64Encoded: $0) }.map { Array($0) },
                        outcome: Array(outcome.utf8)))
            }
            return results
        }
    }
}
