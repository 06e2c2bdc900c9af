/// A least-recently-used cache with a budget: each value has a cost (1 by default, which makes
/// the budget a count; or its size in bytes), and once the costs add up past `budget` the least
/// recently used values are evicted. A value costing more than the whole budget is not kept.
///
/// Lookups, insertions and removals are O(1): a dictionary from keys to slots of an array, the
/// slots chained from newest to oldest. A plain value type: its owner keeps it under a lock
/// (`Locked`) when it is shared.
public struct LRUCache<Key: Hashable, Value> {
    fileprivate struct Slot {
        var key: Key
        var value: Value
        var cost: Int
        /// Neighbouring slots in recency order (-1: none).
        var newer: Int
        var older: Int
    }

    /// Total cost kept at most.
    public let budget: Int
    /// Total cost of the values kept now.
    public private(set) var cost = 0
    private var slots: [Slot?] = []
    /// Emptied slots, reused before the array grows.
    private var free: [Int] = []
    private var positions: [Key: Int] = [:]
    /// Most and least recently used slots (-1: empty).
    private var newest = -1
    private var oldest = -1

    public init(budget: Int) {
        self.budget = max(0, budget)
    }

    /// Values kept now.
    public var count: Int { positions.count }
    public var isEmpty: Bool { positions.isEmpty }

    /// Keys from the most to the least recently used.
    public var keys: [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(count)
        var index = newest
        while index >= 0, let slot = slots[index] {
            keys.append(slot.key)
            index = slot.older
        }
        return keys
    }

    /// Whether `key` is kept; does not count as a use.
    public func contains(_ key: Key) -> Bool { positions[key] != nil }

    /// The value for `key` without counting it as a use.
    public func peek(_ key: Key) -> Value? {
        positions[key].flatMap { slots[$0]?.value }
    }

    /// The value for `key`, which becomes the most recently used.
    public mutating func value(forKey key: Key) -> Value? {
        guard let index = positions[key] else { return nil }
        touch(index)
        return slots[index]?.value
    }

    /// Changes the value for `key` in place and makes it the most recently used; nil (and `body`
    /// not called) when absent. The cost stays what it was.
    public mutating func update<Result>(_ key: Key, _ body: (inout Value) throws -> Result) rethrows -> Result? {
        guard let index = positions[key] else { return nil }
        touch(index)
        return try body(&slots[index]!.value)
    }

    /// Keeps `value` for `key` as the most recently used, replacing any value it had, then evicts
    /// the least recently used others until the costs fit the budget. A value costing more than
    /// the budget is not kept (and the key's previous value is dropped). Returns whether it was kept.
    @discardableResult
    public mutating func setValue(_ value: Value, forKey key: Key, cost: Int = 1) -> Bool {
        let cost = max(0, cost)
        guard cost <= budget else {
            removeValue(forKey: key)
            return false
        }
        if let index = positions[key] {
            self.cost += cost - slots[index]!.cost
            slots[index]!.value = value
            slots[index]!.cost = cost
            touch(index)
        } else {
            let slot = Slot(key: key, value: value, cost: cost, newer: -1, older: -1)
            let index: Int
            if let reused = free.popLast() {
                index = reused
                slots[index] = slot
            } else {
                index = slots.count
                slots.append(slot)
            }
            positions[key] = index
            self.cost += cost
            pushNewest(index)
        }
        while self.cost > budget, oldest >= 0, oldest != newest {
            remove(at: oldest)
        }
        return true
    }

    /// Forgets `key`; returns the value it had.
    @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        guard let index = positions[key] else { return nil }
        return remove(at: index)
    }

    /// Forgets everything.
    public mutating func removeAll() {
        slots.removeAll()
        free.removeAll()
        positions.removeAll()
        newest = -1
        oldest = -1
        cost = 0
    }

    @discardableResult
    private mutating func remove(at index: Int) -> Value? {
        unlink(index)
        guard let slot = slots[index] else { return nil }
        slots[index] = nil
        free.append(index)
        positions[slot.key] = nil
        cost -= slot.cost
        return slot.value
    }

    private mutating func touch(_ index: Int) {
        guard index != newest else { return }
        unlink(index)
        pushNewest(index)
    }

    private mutating func unlink(_ index: Int) {
        guard let slot = slots[index] else { return }
        if slot.newer >= 0 { slots[slot.newer]!.older = slot.older } else { newest = slot.older }
        if slot.older >= 0 { slots[slot.older]!.newer = slot.newer } else { oldest = slot.newer }
    }

    private mutating func pushNewest(_ index: Int) {
        slots[index]!.newer = -1
        slots[index]!.older = newest
        if newest >= 0 { slots[newest]!.newer = index }
        newest = index
        if oldest < 0 { oldest = index }
    }
}

extension LRUCache: Sendable where Key: Sendable, Value: Sendable {}
extension LRUCache.Slot: Sendable where Key: Sendable, Value: Sendable {}
