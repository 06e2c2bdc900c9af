import Foundation
import PushMedia
import Testing

@Suite("Blocking executor")
struct BlockingExecutorTests {
    final class Payload: Sendable {}

    @Test func aJobsCapturesAreReleasedOnceItRan() async throws {
        let executor = BlockingExecutor(name: "test-release", maxThreads: 2)
        weak var watched: Payload?
        for _ in 0..<10 {
            let payload = Payload()
            watched = payload
            await executor.run { _ = payload }
        }
        // The executor's thread may still be between jobs for a moment.
        for _ in 0..<100 where watched != nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(watched == nil, "the executor still holds a finished job's closure")
    }

    @Test func runsEveryJobAndPassesErrors() async throws {
        let executor = BlockingExecutor(name: "test-run", maxThreads: 3)
        let sum = await withTaskGroup(of: Int.self) { group in
            for value in 1...500 { group.addTask { await executor.run { value } } }
            return await group.reduce(0, +)
        }
        #expect(sum == 500 * 501 / 2)
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await executor.run { () throws -> Int in throw Failure() } }
    }
}
