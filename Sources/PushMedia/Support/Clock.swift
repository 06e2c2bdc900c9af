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
