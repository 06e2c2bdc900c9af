import Testing

@testable import PushMedia

@Suite("Bounded concurrency")
struct BoundedConcurrencyTests {
    @Test func neverRunsMoreThanTheWidthAndKeepsTheOrder() async {
        let running = Locked((now: 0, most: 0))
        let results = await Array(0..<40).mapConcurrently(width: 4) { index, item in
            running.withLock {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
            try? await Task.sleep(for: .milliseconds(Int.random(in: 1...5)))
            running.withLock { $0.now -= 1 }
            return item * 10 + index
        }
        #expect(results == (0..<40).map { $0 * 11 })
        #expect(running.withLock { $0.most } <= 4)
    }

    @Test func deliversEachResultOnce() async {
        var seen: [Int] = []
        await ["a", "b", "c", "d", "e"].forEachConcurrently(width: 2) { index, item in
            item + String(index)
        } onResult: { index, output in
            seen.append(index)
            #expect(output == ["a", "b", "c", "d", "e"][index] + String(index))
        }
        #expect(seen.sorted() == [0, 1, 2, 3, 4])
        #expect(await [Int]().mapConcurrently(width: 3) { _, item in item }.isEmpty)
        #expect(await [7].mapConcurrently(width: 0) { _, item in item } == [7])
    }
}
