import Foundation

/// The in-memory LRU of cache entries in front of the index: `capacity` entries, the least
/// recently used one evicted first. Each remembers when its use was last written down, so that
/// retention learns of use at most once per interval, and when its files were last checked.
/// Thread-safe.
final class EntryCache: Sendable {
    private struct Slot {
        var entry: CacheEntry
        var used: Date
        /// When the entry was read from or written to the index.
        var loaded: Date
        /// When a check of its files last began (`.distantPast`: never since loaded).
        var checked: Date = .distantPast
    }

    let capacity: Int
    private let slots: Locked<LRUCache<String, Slot>>

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        slots = Locked(LRUCache(budget: self.capacity))
    }

    var count: Int { slots.withLock { $0.count } }

    /// The entry for `key`, now the most recently used; `due` is true (and the use time renewed)
    /// when its use was last written down `interval` or longer before `now`; `check` is true (and
    /// the check time renewed) when the last check of its files began `checkEvery` or longer
    /// before `now`. Nil when absent or loaded from the index more than `maxAge` before `now`
    /// (the index is read again then).
    func hit(_ key: String, now: Date, interval: Duration, maxAge: Duration, checkEvery: Duration)
        -> (entry: CacheEntry, due: Bool, check: Bool)?
    {
        slots.withLock { slots in
            guard let slot = slots.peek(key), now.timeIntervalSince(slot.loaded) < maxAge.seconds else {
                return nil
            }
            return slots.update(key) { slot in
                let due = now.timeIntervalSince(slot.used) >= interval.seconds
                if due { slot.used = now }
                let check = now.timeIntervalSince(slot.checked) >= checkEvery.seconds
                if check { slot.checked = now }
                return (slot.entry, due, check)
            }
        }
    }

    /// Adds or replaces `key`, evicting the least recently used entry when full.
    func insert(_ key: String, entry: CacheEntry, used: Date, loaded: Date) {
        slots.withLock { _ = $0.setValue(Slot(entry: entry, used: used, loaded: loaded), forKey: key) }
    }

    /// Forgets `key`.
    func remove(_ key: String) {
        slots.withLock { _ = $0.removeValue(forKey: key) }
    }
}
