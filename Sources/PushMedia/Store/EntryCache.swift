import Foundation

/// The in-memory LRU of cache entries in front of the index: `capacity` entries, the least
/// recently used one evicted first. Each remembers when its use was last written down, so that
/// retention learns of use at most once per interval. Thread-safe.
final class EntryCache: Sendable {
    private struct Slot {
        var key: String
        var entry: CacheEntry
        var used: Date
        /// When the entry was read from or written to the index.
        var loaded: Date
        var newer: Int
        var older: Int
    }

    private struct State {
        var slots: [Slot] = []
        var positions: [String: Int] = [:]
        /// Most and least recently used slots (-1: empty).
        var newest = -1
        var oldest = -1

        mutating func unlink(_ index: Int) {
            let slot = slots[index]
            if slot.newer >= 0 { slots[slot.newer].older = slot.older } else { newest = slot.older }
            if slot.older >= 0 { slots[slot.older].newer = slot.newer } else { oldest = slot.newer }
        }

        mutating func pushNewest(_ index: Int) {
            slots[index].newer = -1
            slots[index].older = newest
            if newest >= 0 { slots[newest].newer = index }
            newest = index
            if oldest < 0 { oldest = index }
        }
    }

    let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { state.withLock { $0.positions.count } }

    /// The entry for `key`, now the most recently used; `due` is true (and the use time renewed)
    /// when its use was last written down `interval` or longer before `now`. Nil when absent or
    /// loaded from the index more than `maxAge` before `now` (the index is read again then).
    func hit(_ key: String, now: Date, interval: Duration, maxAge: Duration) -> (entry: CacheEntry, due: Bool)? {
        state.withLock { state in
            guard let index = state.positions[key],
                  now.timeIntervalSince(state.slots[index].loaded) < Double(maxAge.components.seconds) else { return nil }
            state.unlink(index)
            state.pushNewest(index)
            let due = now.timeIntervalSince(state.slots[index].used) >= Double(interval.components.seconds)
            if due { state.slots[index].used = now }
            return (state.slots[index].entry, due)
        }
    }

    /// Adds or replaces `key`, evicting the least recently used entry when full.
    func insert(_ key: String, entry: CacheEntry, used: Date, loaded: Date = Date()) {
        state.withLock { state in
            if let index = state.positions[key] {
                state.slots[index].entry = entry
                state.slots[index].used = used
                state.slots[index].loaded = loaded
                state.unlink(index)
                state.pushNewest(index)
                return
            }
            let index: Int
            if state.slots.count < capacity {
                index = state.slots.count
                state.slots.append(Slot(key: key, entry: entry, used: used, loaded: loaded, newer: -1, older: -1))
            } else {
                index = state.oldest
                state.unlink(index)
                state.positions.removeValue(forKey: state.slots[index].key)
                state.slots[index] = Slot(key: key, entry: entry, used: used, loaded: loaded, newer: -1, older: -1)
            }
            state.positions[key] = index
            state.pushNewest(index)
        }
    }

    /// Forgets `key`. Its slot is reused as the next eviction victim.
    func remove(_ key: String) {
        state.withLock { state in
            guard let index = state.positions.removeValue(forKey: key) else { return }
            state.unlink(index)
            // Park the empty slot at the old end with a key no lookup can match.
            state.slots[index].key = ""
            state.slots[index].newer = state.oldest
            state.slots[index].older = -1
            if state.oldest >= 0 { state.slots[state.oldest].older = index }
            state.oldest = index
            if state.newest < 0 { state.newest = index }
        }
    }
}
