import Foundation

extension Duration {
    /// The duration in seconds, as a `TimeInterval`.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole milliseconds (truncated), as libcurl's timeouts take them.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }

    /// Whole nanoseconds (truncated).
    public var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }

    /// The duration in milliseconds, rounded to 0.1 ms (the unit of `StageTimings`).
    public var reportedMilliseconds: Double {
        (Double(components.seconds) * 10_000 + Double(components.attoseconds) / 1e14).rounded() / 10
    }
}

extension ContinuousClock.Instant {
    /// Time since this instant in milliseconds, to 0.1 ms (the unit of `StageTimings`).
    public var millisecondsElapsed: Double { (ContinuousClock.now - self).reportedMilliseconds }
}

/// The wall-clock time freshness and the store's memory of entries are judged by: the system's
/// (`system`), or one a test moves. Built once and passed in.
public struct WallClock: Sendable {
    private let read: @Sendable () -> Date

    public init(_ read: @escaping @Sendable () -> Date) {
        self.read = read
    }

    /// The time now.
    public var now: Date { read() }

    /// The system's clock.
    public static let system = WallClock(Date.init)
}

/// What a deadline is read against and waited for: the continuous clock (`continuous`), or one a
/// test moves. Built once and passed in.
public struct DeadlineClock: Sendable {
    private let read: @Sendable () -> ContinuousClock.Instant
    private let wait: @Sendable (ContinuousClock.Instant) async throws -> Void

    /// `sleep` returns once `now` has reached its instant, or throws when its task is cancelled.
    public init(
        now: @escaping @Sendable () -> ContinuousClock.Instant,
        sleep: @escaping @Sendable (_ until: ContinuousClock.Instant) async throws -> Void
    ) {
        read = now
        wait = sleep
    }

    /// The instant now.
    public var now: ContinuousClock.Instant { read() }

    /// Returns at `deadline`; throws `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: ContinuousClock.Instant) async throws { try await wait(deadline) }

    /// The continuous clock.
    public static let continuous = DeadlineClock(
        now: { .now }, sleep: { try await Task.sleep(until: $0, clock: .continuous) })
}
