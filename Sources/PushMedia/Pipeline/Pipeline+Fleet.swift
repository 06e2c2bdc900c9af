import Tracing

extension Pipeline {
    /// The shared job's work, done here or on another node: without a coordinator (or while it
    /// cannot be reached) this node runs it behind the job gate. With one, the node that takes
    /// the key's lease runs it and tells the others how it ended; the others give their gate
    /// slot back, wait for that word (at most one lease period at a time, so that a lease whose
    /// holder died is taken over) and read the entry from the store.
    func coordinated(
        key: String, remote: Bool, ticket: JobGate.Ticket, deadline: ContinuousClock.Instant,
        progress: Locked<JobProgress>, run: @escaping @Sendable (FleetLease?) async -> JobResult
    ) async -> JobResult {
        guard let coordinator else {
            return await admitted(ticket, deadline: deadline, progress: progress) { await run(nil) }
        }
        var ticket: JobGate.Ticket? = ticket
        // Each claim in its span (`pushmedia.fleet.lease`): `taken`, `taken_over` (after waiting
        // for a holder that never told its end), `waited` (for another node's word),
        // `ended_elsewhere` or `unavailable`.
        var waitedInVain = false
        while ContinuousClock.now < deadline {
            let span = PipelineTrace.child("pushmedia.fleet.lease")
            func claimed(_ what: String) {
                span?.setAttribute("pushmedia.fleet.lease", what)
                span?.end()
            }
            switch await coordinator.claim(key) {
            case .unavailable:
                claimed("unavailable")
                return await admitted(ticket ?? reserveAgain(), deadline: deadline, progress: progress) {
                    await run(nil)
                }
            case let .held(lease):
                claimed(waitedInVain ? "taken_over" : "taken")
                let result = await admitted(ticket ?? reserveAgain(), deadline: deadline, progress: progress) {
                    await run(lease)
                }
                ticket = nil
                if case .superseded = result.kind {
                    // Taken for dead while it worked: the node that holds the lease now records
                    // the entry; wait for its word as any other node does.
                    lease.stopRenewing()
                    waitedInVain = true
                    continue
                }
                // The entry is in the store: the answer does not wait for the other nodes' word.
                Task { await coordinator.finish(lease, result.kind.fleetEnd) }
                return result
            case let .ended(end):
                claimed("ended_elsewhere")
                if let result = await endedElsewhere(end, key: key, remote: remote, deadline: deadline) {
                    await giveBack(ticket)
                    return result
                }
                // Made a moment ago, yet not in the store (removed since): made here, as alone.
                return await admitted(ticket ?? reserveAgain(), deadline: deadline, progress: progress) {
                    await run(nil)
                }
            case let .elsewhere(wait):
                await giveBack(ticket)
                ticket = nil
                progress.withLock { $0.elsewhere = true }
                let end = await wait.end(min(deadline, .now + config.fleetLease))
                span?.setAttribute("pushmedia.fleet.word", end.map { "\($0.name)" } ?? "none")
                claimed("waited")
                if let end, let result = await endedElsewhere(end, key: key, remote: remote, deadline: deadline) {
                    return result
                }
                waitedInVain = end == nil || end == .abandoned
            }
        }
        await giveBack(ticket)
        return JobResult(kind: .budgetExceeded, timings: StageTimings())
    }

    /// `run` once the gate admits it (a queued ticket waits for a slot until `deadline`).
    private func admitted(
        _ ticket: JobGate.Ticket, deadline: ContinuousClock.Instant, progress: Locked<JobProgress>,
        _ run: @Sendable () async -> JobResult
    ) async -> JobResult {
        switch ticket {
        case .refused:
            // Only after this node gave its slot back to wait for another node, which then died.
            return JobResult(kind: .budgetExceeded, timings: StageTimings())
        case .queued:
            guard let gate, await gate.wait(until: deadline) else {
                return JobResult(kind: .budgetExceeded, timings: StageTimings())
            }
        case .running:
            break
        }
        progress.withLock { $0.started = true }
        let result = await run()
        gate?.release()
        return result
    }

    private func reserveAgain() -> JobGate.Ticket { gate?.reserve() ?? .running }

    /// A slot or queue place not needed after all (another node makes the media).
    private func giveBack(_ ticket: JobGate.Ticket?) async {
        guard let gate, let ticket else { return }
        switch ticket {
        case .running: gate.release()
        case .queued: if await gate.wait(until: .now) { gate.release() }
        case .refused: break
        }
    }

    /// What another node's job means here: its entry (read from the store), its failure, or
    /// nil to claim again (it ended without a result, or its entry is not there).
    private func endedElsewhere(
        _ end: FleetJobEnd, key: String, remote: Bool, deadline: ContinuousClock.Instant
    ) async -> JobResult? {
        switch end {
        case .made:
            guard let (fresh, _) = try? await lookup(key: key, remote: remote, refresh: false, deadline: deadline),
                let fresh
            else { return nil }
            return JobResult(kind: .ready(fresh), timings: StageTimings())
        case let .failed(reason, message):
            return JobResult(kind: .failed(reason: reason, message: message), timings: StageTimings())
        case .abandoned:
            return nil
        }
    }
}

extension FleetJobEnd {
    /// `made`, `failed` or `abandoned`, for a trace.
    var name: String {
        switch self {
        case .made: "made"
        case .failed: "failed"
        case .abandoned: "abandoned"
        }
    }
}

extension Pipeline.JobResult.Kind {
    /// How other nodes learn of this end.
    var fleetEnd: FleetJobEnd {
        switch self {
        case .ready, .renewed: .made
        case let .failed(reason, message): .failed(reason: reason, message: message)
        case .storeUnavailable, .budgetExceeded, .superseded: .abandoned
        }
    }
}
