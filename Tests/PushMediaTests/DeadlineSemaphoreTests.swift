import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

@Suite("Deadline semaphore")
struct DeadlineSemaphoreTests {
    static var far: ContinuousClock.Instant { .now + .seconds(30) }

    /// Starts `acquire(weight)` in a task that records `name` once admitted, and returns once it
    /// has taken its place in the queue (or has already ended: admitted at once, or expired), so
    /// that the next waiter arrives after it.
    func waiter(
        _ semaphore: DeadlineSemaphore, _ weight: Int64, _ name: String, order: Locked<[String]>,
        until deadline: ContinuousClock.Instant = far
    ) async throws -> Task<Int64?, Never> {
        let before = semaphore.waiting
        let ended = Locked(false)
        let task = Task {
            let held = await semaphore.acquire(weight, until: deadline)
            if held != nil { order.withLock { $0.append(name) } }
            ended.withLock { $0 = true }
            return held
        }
        let settled = try await eventually { semaphore.waiting > before || ended.withLock { $0 } }
        #expect(settled, "\(name) neither queued nor ended")
        return task
    }

    @Test func weightsAddUpToTheLimit() async throws {
        let semaphore = DeadlineSemaphore(limit: 10)
        #expect(await semaphore.acquire(4, until: Self.far) == 4)
        #expect(semaphore.reserve(6) == .acquired)
        #expect(semaphore.used == 10)
        #expect(semaphore.reserve(1) == .queued && semaphore.queued == 1)
        semaphore.release(6)
        #expect(await semaphore.wait(for: 1, until: Self.far))
        #expect(semaphore.used == 5 && semaphore.queued == 0)
        semaphore.release(4)
        semaphore.release(1)
        #expect(semaphore.used == 0)
    }

    @Test func waitersAreAdmittedInArrivalOrder() async throws {
        let semaphore = DeadlineSemaphore(limit: 10)
        let order = Locked<[String]>([])
        let first = try #require(await semaphore.acquire(10, until: Self.far))
        let a = try await waiter(semaphore, 6, "a", order: order)
        let b = try await waiter(semaphore, 6, "b", order: order)
        let c = try await waiter(semaphore, 6, "c", order: order)
        #expect(order.withLock { $0 }.isEmpty && semaphore.queued == 3 && semaphore.waiting == 3)
        semaphore.release(first)
        semaphore.release(try #require(await a.value))
        semaphore.release(try #require(await b.value))
        semaphore.release(try #require(await c.value))
        #expect(order.withLock { $0 } == ["a", "b", "c"])
        #expect(semaphore.used == 0 && semaphore.queued == 0)
    }

    @Test func theHeadBlocksSmallerRequestsBehindIt() async throws {
        let semaphore = DeadlineSemaphore(limit: 10)
        let order = Locked<[String]>([])
        #expect(semaphore.reserve(5) == .acquired)
        let big = try await waiter(semaphore, 8, "big", order: order)
        // 3 would fit beside 5, but 8 came first.
        let small = try await waiter(semaphore, 3, "small", order: order)
        #expect(order.withLock { $0 }.isEmpty && semaphore.used == 5 && semaphore.waiting == 2)
        semaphore.release(5)
        #expect(await big.value == 8)
        #expect(order.withLock { $0 } == ["big"] && semaphore.used == 8 && semaphore.waiting == 1)
        semaphore.release(8)
        #expect(await small.value == 3)
        #expect(order.withLock { $0 } == ["big", "small"])
    }

    @Test func aWaitExpiresAtItsDeadlineAndLetsTheNextIn() async throws {
        let clock = TestClock()
        let semaphore = DeadlineSemaphore(limit: 10, clock: clock.deadlines)
        let order = Locked<[String]>([])
        #expect(semaphore.reserve(5) == .acquired)
        let big = try await waiter(semaphore, 8, "big", order: order, until: clock.now + .milliseconds(500))
        let small = try await waiter(semaphore, 2, "small", order: order)
        #expect(try await eventually { clock.sleepers == 2 }, "a wait without its timer")
        clock.advance(by: .milliseconds(499))
        #expect(clock.sleepers == 2 && semaphore.waiting == 2, "expired before its deadline")
        clock.advance(by: .milliseconds(1))
        #expect(await big.value == nil)
        // The head gave up: the one behind it fits and is admitted without a release.
        #expect(await small.value == 2)
        #expect(order.withLock { $0 } == ["small"] && semaphore.used == 7 && semaphore.queued == 0)
    }

    @Test func aDeadlineAlreadyPastFailsAtOnce() async {
        let semaphore = DeadlineSemaphore(limit: 1)
        #expect(semaphore.reserve() == .acquired)
        #expect(await semaphore.acquire(until: .now - .seconds(1)) == nil)
        #expect(semaphore.queued == 0)
    }

    @Test func theQueueLimitRefusesAtOnce() async throws {
        let clock = TestClock()
        let semaphore = DeadlineSemaphore(limit: 1, queueLimit: 2, clock: clock.deadlines)
        #expect(semaphore.reserve() == .acquired)
        #expect(semaphore.reserve() == .queued)
        #expect(semaphore.reserve() == .queued)
        #expect(semaphore.reserve() == .refused)
        #expect(await semaphore.acquire(until: Self.far) == nil)
        #expect(semaphore.queued == 2)
        // A queue place comes back when its wait ends, admitted or not.
        let expiring = Task { await semaphore.wait(until: clock.now + .milliseconds(50)) }
        #expect(try await eventually { semaphore.waiting == 1 && clock.sleepers == 1 })
        clock.advance(by: .milliseconds(50))
        #expect(await !expiring.value)
        #expect(semaphore.queued == 1)
        semaphore.release()
        #expect(await semaphore.wait(until: Self.far))
        #expect(semaphore.queued == 0 && semaphore.used == 1)
        #expect(DeadlineSemaphore(limit: 1, queueLimit: 0).reserve(2) == .acquired)
    }

    @Test func aRequestLargerThanTheLimitRunsAlone() async throws {
        let semaphore = DeadlineSemaphore(limit: 100)
        let order = Locked<[String]>([])
        #expect(semaphore.reserve(1) == .acquired)
        let huge = try await waiter(semaphore, 5_000, "huge", order: order)
        #expect(order.withLock { $0 }.isEmpty)
        semaphore.release(1)
        #expect(await huge.value == 100)
        #expect(semaphore.used == 100)
        let small = try await waiter(semaphore, 1, "small", order: order)
        #expect(order.withLock { $0 } == ["huge"])
        semaphore.release(5_000)  // released as it was taken: clamped to the limit
        #expect(await small.value == 1)
        #expect(semaphore.used == 1)
        #expect(semaphore.clamped(0) == 1 && semaphore.clamped(-3) == 1 && semaphore.clamped(101) == 100)
    }

    @Test func jobGateKeepsItsTickets() async throws {
        let gate = JobGate(limit: 1, queueLimit: 1)
        #expect(gate.reserve() == .running)
        #expect(gate.reserve() == .queued)
        #expect(gate.reserve() == .refused)
        #expect(gate.inFlight == 1 && gate.queued == 1)
        let waiting = Task { await gate.wait(until: Self.far) }
        #expect(try await eventually { gate.waiting == 1 }, "the queued job never waited")
        gate.release()
        #expect(await waiting.value)
        #expect(gate.inFlight == 1 && gate.queued == 0)
        gate.release()
        #expect(gate.inFlight == 0)
    }

    /// `idle` returns at once when nobody is queued and a unit is free; otherwise once the
    /// queue has emptied and a unit is free again (not while the head still waits), or when
    /// its task is cancelled.
    @Test(.timeLimit(.minutes(1))) func idleWaitsForAnEmptyQueueAndAFreeUnit() async throws {
        let clock = TestClock()
        let semaphore = DeadlineSemaphore(limit: 2, clock: clock.deadlines)
        await semaphore.idle()
        _ = try #require(await semaphore.acquire(2, until: Self.far))
        let woke = Locked(false)
        let watcher = Task {
            await semaphore.idle()
            woke.withLock { $0 = true }
        }
        #expect(try await eventually { semaphore.idleWaiting == 1 })
        let order = Locked<[String]>([])
        let queued = try await waiter(semaphore, 1, "queued", order: order)
        semaphore.release(1)  // the queued one takes the unit freed: still no unit free
        #expect(await queued.value == 1)
        #expect(semaphore.idleWaiting == 1 && !woke.withLock { $0 }, "idle while every unit is held")
        semaphore.release(1)
        await watcher.value
        #expect(woke.withLock { $0 })
        // A queue that empties by a deadline wakes it too; cancelling ends the wait.
        semaphore.release(1)
        let one = try #require(await semaphore.acquire(1, until: Self.far))
        let expiring = try await waiter(semaphore, 2, "expiring", order: order, until: clock.now + .milliseconds(300))
        let cancelled = Task { await semaphore.idle() }
        #expect(try await eventually { semaphore.idleWaiting == 1 })
        cancelled.cancel()
        await cancelled.value
        #expect(semaphore.idleWaiting == 0)
        let afterExpiry = Task { await semaphore.idle() }
        #expect(try await eventually { semaphore.idleWaiting == 1 })
        clock.advance(by: .milliseconds(300))
        #expect(await expiring.value == nil)
        await afterExpiry.value
        #expect(semaphore.queued == 0 && semaphore.used == 1)
        semaphore.release(one)
    }
}
