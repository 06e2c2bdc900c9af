extension ContinuousClock.Instant {
    /// Time since this instant in milliseconds, to 0.1 ms (the unit of `StageTimings`).
    public var millisecondsElapsed: Double {
        let elapsed = ContinuousClock.now - self
        return (Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15 * 10)
            .rounded() / 10
    }
}
