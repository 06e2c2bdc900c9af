import Foundation
import PushMedia

/// A clock the test moves: its wall-clock time (`wall`, from the whole second it was made in) and
/// the instants deadlines are read against (`deadlines`) stand still until `advance`, which also
/// wakes the sleepers whose instant it reaches.
public final class TestClock: Sendable {
    private struct Sleeper {
        var until: ContinuousClock.Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var elapsed: Duration = .zero
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
    }

    private let startDate = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
    private let startInstant = ContinuousClock.now
    private let state = Locked(State())

    public init() {}

    /// The wall-clock time now.
    public var date: Date { startDate.addingTimeInterval(Self.seconds(state.withLock { $0.elapsed })) }

    /// The instant now.
    public var now: ContinuousClock.Instant { startInstant + state.withLock { $0.elapsed } }

    /// Sleepers not woken yet.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// This clock as the wall clock of a pipeline or a store.
    public var wall: WallClock { WallClock { [self] in date } }

    /// This clock as what deadlines are read against.
    public var deadlines: DeadlineClock {
        DeadlineClock(now: { [self] in now }, sleep: { [self] in try await sleep(until: $0) })
    }

    /// Moves the time on by `duration` and wakes the sleepers it reaches.
    public func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.elapsed += duration
            let now = startInstant + state.elapsed
            let due = state.sleepers.filter { $0.value.until <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    /// Returns once `advance` has reached `deadline` (at once when it has); throws
    /// `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id = state.withLock {
            $0.nextID += 1
            return $0.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if startInstant + state.elapsed >= deadline { return .success(()) }
                    state.sleepers[id] = Sleeper(until: deadline, continuation: continuation)
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
