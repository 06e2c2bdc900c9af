import Tracing

extension Pipeline {
    /// One media to make or find: its cache key and source, for a platform, by a deadline.
    struct MediaRequest: Sendable {
        var key: String
        var source: Source
        var profile: PlatformProfile
        /// A video's poster frame at this time (part of `key`).
        var posterTime: Double?
        /// Revalidate a cached result with its origin even when it is fresh.
        var refresh: Bool
        var deadline: ContinuousClock.Instant
        /// Another door's options for the same source, whose entry answers too when it is fresh
        /// and of this MIME type (a media URL asking for `.jpg` finds what `/v1/process` made).
        var alternate: (options: String, mime: String)?
    }

    /// How a media's request ended: what each door (`/v1/process` and `/v1/batch`, the relays,
    /// media URLs) turns into its own answer.
    enum Resolution: Sendable {
        /// The attachment: fresh in the store (`cacheHit`), or made by the job this request joined.
        case ready(CacheEntry, cacheHit: Bool)
        /// The stale entry, confirmed by its origin and kept for a new lifetime.
        case renewed(CacheEntry)
        /// The stale entry serves (RFC 5861's stale-if-error): `why` no fresh one could be had
        /// (the origin is down, the budget ran out while revalidating, too many jobs).
        case stale(CacheEntry, why: String)
        /// The source cannot be made into an attachment: `reason` is the outcome's (`http_404`,
        /// `unsupported_type`, …), `progress` what the job learnt (the sniffed type).
        case failed(reason: String, message: String, progress: JobProgress)
        /// The deadline came first; the job goes on. `progress`: what it has made so far.
        case notReady(JobProgress)
        /// Too many jobs running and queued to start one: `why` says how many.
        case overloaded(why: String)
        /// The store could not be read (`progress` nil: no job ran) or written.
        case storeUnavailable(why: String, progress: JobProgress?)
    }

    /// The one way from a media request to its resolution: the store (memory, then the index:
    /// one freshness rule, `CacheEntry.isFresh`), the request's alternate entry, the shared job
    /// for the key behind the job gate (which goes on `config.backgroundLimit` past the deadline),
    /// raced against the deadline, stale-if-error and overload. The stage timings of the job
    /// this request waited for, if it ended in time.
    func resolve(_ request: MediaRequest) async -> (Resolution, StageTimings?) {
        // Its span (`pushmedia.resolve`) is the parent of the job's steps when this request starts the job.
        guard let span = PipelineTrace.child(PipelineTrace.resolve) else { return await resolving(request) }
        defer { span.end() }
        let resolved = await ServiceContext.$current.withValue(span.context) { await resolving(request) }
        PipelineTrace.record(resolved.0, profile: request.profile, source: request.source, on: span)
        return resolved
    }

    private func resolving(_ request: MediaRequest) async -> (Resolution, StageTimings?) {
        let (key, remote) = (request.key, request.source.isRemote)
        if !request.refresh, let entry = store.rememberedFresh(key: key, remote: remote) {
            return (.ready(entry, cacheHit: true), nil)
        }
        if !request.refresh, let alternate = request.alternate,
            case let alternateKey = MediaStore.cacheKey(source: request.source.identity, options: alternate.options),
            let (entry, _) = try? await lookup(
                key: alternateKey, remote: remote, refresh: false, deadline: request.deadline),
            let entry, entry.attachment.mime == alternate.mime
        {
            return (.ready(entry, cacheHit: true), nil)
        }
        let cached: CacheEntry?
        let stale: CacheEntry?
        do {
            (cached, stale) = try await lookup(
                key: key, remote: remote, refresh: request.refresh, deadline: request.deadline)
        } catch {
            return (.storeUnavailable(why: "the store cannot be read (\(error))", progress: nil), nil)
        }
        if let cached { return (.ready(cached, cacheHit: true), nil) }
        guard
            let job = sharedJob(
                key: key, source: request.source, profile: request.profile, posterTime: request.posterTime,
                previous: stale, refresh: request.refresh, deadline: request.deadline + config.backgroundLimit)
        else {
            let why = "\(gate?.limit ?? 0) jobs are running and \(gate?.queueLimit ?? 0) are queued"
            return (stale.map { .stale($0, why: why) } ?? .overloaded(why: why), nil)
        }
        let result = await Self.race(job, deadline: request.deadline)
        let progress = job.progress.withLock { $0 }
        let resolution: Resolution
        switch result?.kind {
        case let .ready(entry)?:
            resolution = .ready(entry, cacheHit: false)
        case let .renewed(entry)?:
            resolution = .renewed(entry)
        case let .failed(reason, message)? where stale != nil && ReasonCode.originUnavailable.contains(reason):
            // An origin that is down is no reason to lose a good attachment; what it answers (a
            // 404, bytes that are no image) still counts.
            resolution = .stale(stale!, why: "revalidating with the origin failed (\(message))")
        case let .failed(reason, message)?:
            resolution = .failed(reason: reason, message: message, progress: progress)
        case let .storeUnavailable(message)?:
            resolution = .storeUnavailable(why: "the store cannot be written (\(message))", progress: progress)
        case .budgetExceeded?, .superseded?, nil:
            resolution =
                stale.map { .stale($0, why: "the budget ran out while revalidating with the origin") }
                ?? .notReady(progress)
        }
        return (resolution, result?.timings)
    }

    /// The cached entry for `key` if fresh, else the stale one (to revalidate). A fresh entry in
    /// memory answers at once; a stale one is looked up again in the index, where another node
    /// may have renewed it.
    func lookup(
        key: String, remote: Bool, refresh: Bool, deadline: ContinuousClock.Instant
    ) async throws -> (fresh: CacheEntry?, stale: CacheEntry?) {
        if !refresh, let entry = store.rememberedFresh(key: key, remote: remote) { return (entry, nil) }
        // One read of the index (a file, or a GET): on the fetch threads, not behind transcodes.
        let entry = try await io.run { [store] in try store.lookup(key: key, fromIndex: true, deadline: deadline) }
        if let entry, refresh || !entry.isFresh(remote: remote, now: store.clock.now) { return (nil, entry) }
        return (entry, nil)
    }

    /// The job's result, or nil when the deadline comes first.
    static func race(_ job: SharedJob, deadline: ContinuousClock.Instant) async -> JobResult? {
        let resolver = OnceResolver<JobResult?>()
        Task { resolver.resolve(await job.task.value) }
        let timer = Task {
            try? await Task.sleep(until: deadline, clock: .continuous)
            resolver.resolve(nil)
        }
        let result = await resolver.value()
        timer.cancel()
        return result
    }
}
