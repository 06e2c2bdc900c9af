import PostgresNIO
import PushMedia

/// Watching the lives of the holders this node waits for (`FleetLife.watch`): one connection per
/// holder, closed once nobody waits on it.
extension Fleet {
    /// A wait for another node's job, and the pid of the life that holds its lease.
    struct Waiter {
        let resolver: OnceResolver<FleetJobEnd?>
        var holder: Int?
    }

    /// What a claim read of a key's lease.
    struct Claimed {
        let state: String, reason: String, message: String, previous: String?
        let epoch: Int64
        let holder: Int
    }

    /// Marks the waiter `id` of `key` as waiting on the life `holder`, and watches that life
    /// (one connection per holder, however many keys wait on it): when it ends, every waiter on
    /// it claims again at once, and takes the lease over.
    func watch(_ holder: Int, for key: String, _ id: ObjectIdentifier) {
        waiters.withLock { $0[key]?[id]?.holder = holder }
        let start = watches.withLock { watches -> Bool in
            guard watches[holder] == nil, watches.count < Self.watchLimit else { return false }
            watches[holder] = .some(nil)
            return true
        }
        guard start else { return }
        Task {
            let ended = await life.watch(holder) { connection in
                let kept = watches.withLock { watches -> Bool in
                    guard watches[holder] != nil else { return false }
                    watches[holder] = connection
                    return true
                }
                if !kept { Task { try? await connection.close() } }
            }
            watches.withLock { _ = $0.removeValue(forKey: holder) }
            // Ended, or the watch failed: the waiters on that holder claim again either way.
            let woken = waiters.withLock { waiters in
                waiters.values.flatMap { $0.values.filter { $0.holder == holder } }
            }
            if ended { metrics?.lifeEnded.increment() }
            for waiter in woken { waiter.resolver.resolve(nil) }
        }
    }

    /// Closes the watches that nobody waits on any more.
    func unwatchIdle() {
        let idle = watches.withLock { watches -> [PostgresConnection] in
            guard !watches.isEmpty else { return [] }
            let waited = waiters.withLock { Set($0.values.flatMap { $0.values.compactMap(\.holder) }) }
            var closing: [PostgresConnection] = []
            for (holder, connection) in watches where !waited.contains(holder) {
                if let connection { closing.append(connection) }
                watches.removeValue(forKey: holder)
            }
            return closing
        }
        for connection in idle { Task { try? await connection.close() } }
    }
}
