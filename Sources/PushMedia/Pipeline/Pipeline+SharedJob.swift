extension Pipeline {
    /// How a job ended, and the time it spent in each stage.
    struct JobResult: Sendable {
        enum Kind: Sendable {
            case ready(CacheEntry)
            /// The previous entry, confirmed by the origin and recorded with a new lifetime.
            case renewed(CacheEntry)
            case failed(reason: String, message: String)
            /// The store failed (unreachable, full): the result could not be kept.
            case storeUnavailable(String)
            case budgetExceeded
            /// The fleet's lease was lost before the entry was recorded (this node was taken for
            /// dead): the result is dropped, and the job is claimed again.
            case superseded
        }
        var kind: Kind
        var timings: StageTimings
    }

    /// A job that every payload naming the same source (under the same options) waits for; in a
    /// fleet, every node's (`coordinated`).
    struct SharedJob: Sendable {
        var task: Task<JobResult, Never>
        /// What it has achieved so far: the best attempt, should the budget run out.
        var progress: Locked<JobProgress>
    }

    /// The running job for `key`, or a new one; nil when the gate refuses a new one. Unless
    /// `refresh`, a fresh entry a job recorded after the caller's lookup missed answers instead
    /// (as a job already ended): a job puts its entry in memory before it leaves `inFlight`, so
    /// a caller that finds neither the job nor the entry here is the first.
    func sharedJob(
        key: String, source: Source, profile: PlatformProfile, posterTime: Double?, previous: CacheEntry?,
        refresh: Bool, deadline: ContinuousClock.Instant
    ) -> SharedJob? {
        inFlight.withLock { jobs in
            if let job = jobs[key] { return job }
            if !refresh, let entry = store.rememberedFresh(key: key, remote: source.isRemote) {
                return SharedJob(
                    task: Task { JobResult(kind: .ready(entry), timings: StageTimings()) },
                    progress: Locked(JobProgress(started: true)))
            }
            let ticket = gate?.reserve() ?? .running
            if case .refused = ticket { return nil }
            let progress = Locked(JobProgress())
            let task = Task {
                defer { self.inFlight.withLock { _ = $0.removeValue(forKey: key) } }
                return await self.coordinated(
                    key: key, remote: source.isRemote, ticket: ticket, deadline: deadline, progress: progress
                ) { lease in
                    await self.runJob(
                        source: source, key: key, profile: profile, posterTime: posterTime,
                        previous: previous, deadline: deadline, progress: progress, lease: lease)
                }
            }
            let job = SharedJob(task: task, progress: progress)
            jobs[key] = job
            return job
        }
    }
}
