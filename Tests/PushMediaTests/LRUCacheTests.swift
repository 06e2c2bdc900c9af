import Testing

@testable import PushMedia

@Suite("LRU cache")
struct LRUCacheTests {
    @Test func evictsTheLeastRecentlyUsedFirst() {
        var cache = LRUCache<String, Int>(budget: 3)
        for (value, key) in ["a", "b", "c"].enumerated() { cache.setValue(value, forKey: key) }
        #expect(cache.keys == ["c", "b", "a"])
        #expect(cache.value(forKey: "a") == 0)  // a is now the newest
        #expect(cache.peek("b") == 1)  // peeking is no use: b stays the oldest
        cache.setValue(3, forKey: "d")
        #expect(cache.keys == ["d", "a", "c"])
        #expect(!cache.contains("b") && cache.count == 3 && cache.cost == 3)
        cache.setValue(4, forKey: "e")
        cache.setValue(5, forKey: "f")
        #expect(cache.keys == ["f", "e", "d"])
    }

    @Test func aByteBudgetEvictsUntilTheNewValueFits() {
        var cache = LRUCache<String, String>(budget: 1000)
        cache.setValue("a", forKey: "a", cost: 400)
        cache.setValue("b", forKey: "b", cost: 400)
        cache.setValue("c", forKey: "c", cost: 100)
        #expect(cache.cost == 900)
        cache.setValue("d", forKey: "d", cost: 600)  // a and b must go for 600 more
        #expect(cache.keys == ["d", "c"] && cache.cost == 700)
        cache.setValue("e", forKey: "e", cost: 1000)  // exactly the budget: alone
        #expect(cache.keys == ["e"] && cache.cost == 1000)
    }

    @Test func aValueLargerThanTheBudgetIsNotKept() {
        var cache = LRUCache<String, Int>(budget: 100)
        cache.setValue(1, forKey: "small", cost: 10)
        #expect(cache.setValue(2, forKey: "huge", cost: 101) == false)
        #expect(!cache.contains("huge") && cache.keys == ["small"] && cache.cost == 10)
        // Replacing a key with a value too large drops its old value.
        #expect(cache.setValue(3, forKey: "small", cost: 500) == false)
        #expect(cache.isEmpty && cache.cost == 0)
        var none = LRUCache<String, Int>(budget: 0)
        #expect(none.setValue(1, forKey: "a") == false && none.isEmpty)
    }

    @Test func updatingAKeyReplacesItsValueAndCost() {
        var cache = LRUCache<String, Int>(budget: 100)
        cache.setValue(1, forKey: "a", cost: 30)
        cache.setValue(2, forKey: "b", cost: 30)
        cache.setValue(10, forKey: "a", cost: 60)
        #expect(cache.count == 2 && cache.cost == 90 && cache.keys == ["a", "b"])
        #expect(cache.peek("a") == 10)
        cache.setValue(20, forKey: "b", cost: 50)  // 110: the oldest other (a) goes
        #expect(cache.keys == ["b"] && cache.cost == 50)
        #expect(cache.update("b") { $0 += 1 } != nil && cache.peek("b") == 21)
        #expect(cache.update("missing") { $0 += 1 } == nil)
    }

    @Test func removedSlotsAreReused() {
        var cache = LRUCache<Int, Int>(budget: 3)
        for key in 0..<3 { cache.setValue(key, forKey: key) }
        #expect(cache.removeValue(forKey: 1) == 1)
        #expect(cache.removeValue(forKey: 1) == nil)
        #expect(cache.keys == [2, 0] && cache.cost == 2)
        cache.setValue(3, forKey: 3)
        #expect(cache.keys == [3, 2, 0])
        cache.setValue(4, forKey: 4)
        #expect(cache.keys == [4, 3, 2])
        for key in 5..<1000 { cache.setValue(key, forKey: key) }
        #expect(cache.keys == [999, 998, 997])
        cache.removeAll()
        #expect(cache.isEmpty && cache.cost == 0 && cache.keys.isEmpty)
        cache.setValue(1, forKey: 1)
        #expect(cache.keys == [1])
    }
}
