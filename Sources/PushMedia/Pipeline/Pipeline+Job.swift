import Foundation
import Tracing

extension Pipeline {
    /// One step of a job: it reads and fills the job's context, and returns how the job ended,
    /// or nil to go on to the next step.
    struct JobStep {
        /// What the step does once the job's deadline has passed.
        enum PastDeadline {
            /// New work the job needs: the job ends (`budgetExceeded`) instead.
            case endsJob
            /// New work the job can do without (reading a video's streams, its poster frame):
            /// skipped, the job goes on.
            case skipped
            /// Storing and recording keep what is already made: the deadline does not stop them.
            case runs
        }

        /// Its span's name after `pushmedia.` (`fetch`, `sniff`, `decide`, `transcode…`, `store.put`).
        let name: String
        let run: (inout JobContext) async throws -> JobResult.Kind?
        var pastDeadline = PastDeadline.endsJob
        /// Whether the step has anything to do for this job.
        var applies: (JobContext) -> Bool = { _ in true }

        /// New work: not started past the deadline, which ends the job.
        static func work(_ name: String, _ run: @escaping (inout JobContext) async throws -> JobResult.Kind?) -> JobStep
        {
            JobStep(name: name, run: run)
        }

        /// New work that only some jobs have: skipped, deadline or not, when `applies` says no.
        static func work(
            _ name: String, when applies: @escaping (JobContext) -> Bool,
            _ run: @escaping (inout JobContext) async throws -> JobResult.Kind?
        ) -> JobStep {
            JobStep(name: name, run: run, applies: applies)
        }

        /// New work the job can do without: skipped past the deadline (and when `applies` says no).
        static func optional(
            _ name: String, when applies: @escaping (JobContext) -> Bool = { _ in true },
            _ run: @escaping (inout JobContext) async throws -> JobResult.Kind?
        ) -> JobStep {
            JobStep(name: name, run: run, pastDeadline: .skipped, applies: applies)
        }

        /// Keeps what is made (or only decides, at no cost): runs past the deadline too.
        static func keep(_ name: String, _ run: @escaping (inout JobContext) async throws -> JobResult.Kind?) -> JobStep
        {
            JobStep(name: name, run: run, pastDeadline: .runs)
        }
    }

    /// The steps up to knowing what the source is.
    private var intakeSteps: [JobStep] {
        [.work("fetch", fetch), .work("transcode_slot", awaitTranscodeSlot), .work("sniff", sniff)]
    }

    /// The steps for a source of `kind`. A thumbnail or poster frame is stored as soon as it is
    /// made: it is the best attempt should the budget run out before the attachment is ready.
    private func steps(for kind: MediaKind) -> [JobStep] {
        if kind == .image {
            [
                .work("decide", decideImage), .work("transcode.thumbnail", makeThumbnail),
                .keep("store.put", storeOutputs),
                .work("transcode", makeImage), .keep("store.put", storeOutputs), .keep("store.record", recordEntry),
            ]
        } else {
            [
                .keep("decide", decideMedia), .optional("probe", when: \.readsStreams, probeStreams),
                .optional("transcode.poster", when: \.needsPoster, makePoster), .keep("store.put", storeOutputs),
                .keep("decide", chooseAudioVideo), .work("transcode", when: \.needsTranscode, transcodeAudioVideo),
                .keep("store.put", storeOutputs), .keep("store.record", recordEntry),
            ]
        }
    }

    /// Fetches, checks, transcodes and stores one source, and records the cache entry. With
    /// `previous` (a stale entry), the fetch is conditional: a 304, or the same bytes again,
    /// renew that entry without transcoding.
    func runJob(
        source: Source, key: String, profile: PlatformProfile, posterTime: Double?, previous: CacheEntry?,
        deadline: ContinuousClock.Instant, progress: Locked<JobProgress>, lease: FleetLease? = nil
    ) async -> JobResult {
        var job = JobContext(
            source: source, key: key, profile: profile,
            transcoder: transcoders[profile.id].flatMap { $0.profile == profile ? $0 : nil }
                ?? Transcoder(config: config, profile: profile, threads: resources.vips),
            posterTime: posterTime, previous: previous, deadline: deadline, progress: progress,
            temporary: store.temporaryPath(), lease: lease)
        resources.vips.jobBegan()
        runCount.withLock { $0 += 1 }
        let kind = await perform(&job)
        resources.vips.jobEnded()
        job.timings.total = job.started.millisecondsElapsed
        release(job)
        return JobResult(kind: kind, timings: job.timings)
    }

    /// Runs the job's steps, and turns what they throw into how the job ended.
    private func perform(_ job: inout JobContext) async -> JobResult.Kind {
        do {
            if let end = try await run(intakeSteps, on: &job) { return end }
            if let end = try await run(steps(for: job.sniff.format.kind), on: &job) { return end }
            throw Failure(reason: ReasonCode.internalError, message: "the job ended without a result")
        } catch let error as StoreError {
            return .storeUnavailable(Self.withoutWorkPaths(error.description, job.temporary))
        } catch let error as FetchError where error.isLocalWrite {
            // The download could not be written to local disk: the store's fault, not the media's.
            return .storeUnavailable(Self.withoutWorkPaths(error.description, job.temporary))
        } catch let error as ReasonedError {
            return .failed(reason: error.reason, message: Self.withoutWorkPaths(error.description, job.temporary))
        } catch {
            return .failed(reason: ReasonCode.internalError, message: Self.withoutWorkPaths("\(error)", job.temporary))
        }
    }

    /// Runs `steps` in order until one ends the job. The one rule for the deadline: past it, no
    /// step of new work starts (the job ends, or goes on without what it can do without); what
    /// is made is still stored and recorded.
    private func run(_ steps: [JobStep], on job: inout JobContext) async throws -> JobResult.Kind? {
        for step in steps where step.applies(job) {
            if ContinuousClock.now >= job.deadline {
                switch step.pastDeadline {
                case .endsJob: return .budgetExceeded
                case .skipped: continue
                case .runs: break
                }
            }
            if let end = try await traced(step, &job) { return end }
        }
        return nil
    }

    /// Runs `step` in its span (`pushmedia.<name>`), a child of the span the job began in. A
    /// step that throws marks its span with the reason code only: a message may quote a URL.
    private func traced(_ step: JobStep, _ job: inout JobContext) async throws -> JobResult.Kind? {
        guard let span = PipelineTrace.child("pushmedia." + step.name) else { return try await step.run(&job) }
        defer { span.end() }
        do {
            let end = try await ServiceContext.$current.withValue(span.context) { try await step.run(&job) }
            PipelineTrace.record(step: step.name, job: job, on: span)
            if case let .failed(reason, _)? = end { span.setStatus(SpanStatus(code: .error, message: reason)) }
            return end
        } catch {
            PipelineTrace.record(step: step.name, job: job, on: span)
            let reason =
                (error as? ReasonedError)?.reason ?? (error is StoreError ? ReasonCode.storeUnavailable : "error")
            span.setAttribute("pushmedia.reason", reason)
            span.setStatus(SpanStatus(code: .error, message: reason))
            throw error
        }
    }

    /// Gives back what the job held, and removes its work files.
    private func release(_ job: JobContext) {
        if let held = job.heldDecodeMemory { decodeBudget.release(held) }
        if job.holdsTranscodeSlot { transcodeGate?.release() }
        for file in job.workFiles { unlink(file) }
    }

    // MARK: Steps

    /// Downloads a remote source (conditionally when revalidating: a 304 renews the previous
    /// entry) or copies a local one.
    private func fetch(_ job: inout JobContext) async throws -> JobResult.Kind? {
        job.clock = .now
        switch job.source {
        case let .remote(url):
            let conditions = job.previous.map(\.validators).flatMap { $0.canRevalidate ? $0 : nil }
            let response: FetchResponse
            let (fetcher, temporary, limits, deadline) = (
                fetcher, job.temporary, FetchLimits(config: config), job.deadline
            )
            let trace = config.originTraceparent ? PipelineTrace.propagated() : []
            let download: @Sendable () async throws(FetchError) -> FetchResponse = {
                try await fetcher.fetch(
                    url, to: temporary, limits: limits, deadline: deadline, revalidating: conditions,
                    extraHeaders: trace)
            }
            do {
                // A plain download is shared with the jobs that want the same URL at the same time.
                response =
                    conditions == nil
                    ? try await downloads.fetch(url, to: temporary, download: download) : try await download()
            } catch {
                if error == .deadlineExceeded { return .budgetExceeded }
                throw error
            }
            job.fetchStatus = response.httpStatus
            if response.notModified, let previous = job.previous {
                job.timings.fetch = job.clock.millisecondsElapsed
                return try await renew(previous, response.validators, job: job)
            }
            job.bytes = response.bytes
            job.firstByte = response.firstByteMilliseconds
            job.validators = response.validators
            job.streamedHash = response.sha256
        case let .local(path, _):
            let maxBytes = config.maxSourceBytes
            let temporary = job.temporary
            job.bytes = try await io.run { try LocalSource.copy(path, to: temporary, maxBytes: maxBytes) }
        }
        job.timings.fetch = job.clock.millisecondsElapsed
        return nil
    }

    /// Waits for a slot among the jobs past their fetch (`config.maxTranscodes`).
    private func awaitTranscodeSlot(_ job: inout JobContext) async -> JobResult.Kind? {
        guard let transcodeGate else { return nil }
        if transcodeGate.reserve() == .queued, await !transcodeGate.wait(until: job.deadline) { return .budgetExceeded }
        job.holdsTranscodeSlot = true
        return nil
    }

    /// Sniffs the type (and takes a remote source's hash: the same bytes again renew the previous entry).
    private func sniff(_ job: inout JobContext) async throws -> JobResult.Kind? {
        job.clock = .now
        let temporary = job.temporary
        let isRemote = job.source.isRemote
        let streamed = job.streamedHash
        let (sniff, sourceHash) = try await cpu.run { () throws -> (SniffResult, String?) in
            // A download was hashed as it streamed; the file is read again only without that hash.
            (try Sniffer.sniff(path: temporary), isRemote ? streamed ?? (try? MediaStore.sha256(file: temporary)) : nil)
        }
        if let previous = job.previous, let sourceHash, previous.sourceSHA256 == sourceHash,
            let validators = job.validators
        {
            job.timings.sniff = job.clock.millisecondsElapsed
            return try await renew(previous, validators, job: job)
        }
        job.sniff = sniff
        job.sourceHash = sourceHash
        let bytes = job.bytes
        job.progress.withLock {
            $0.sniff = sniff
            $0.sourceBytes = bytes
        }
        job.timings.sniff = job.clock.millisecondsElapsed
        return nil
    }

    /// Stores what the steps before made.
    private func storeOutputs(_ job: inout JobContext) async throws -> JobResult.Kind? {
        let made = job.made
        guard !made.isEmpty else { return nil }
        job.made = MadeFiles()
        let deadline = job.deadline
        job.clock = .now
        let stored = try await io.run { [store] () throws -> StoredFiles in
            try Self.store(made, in: store, deadline: deadline)
        }
        job.count(\.store)
        job.stored = job.stored.merging(stored)
        // Until the attachment is stored, the poster frame or thumbnail is the best attempt.
        if job.stored.attachment == nil, let preview = job.stored.poster ?? job.stored.thumbnail {
            job.progress.withLock { $0.thumbnail = preview }
        }
        return nil
    }

    /// Blocking: call on the I/O executor (an object store waits on the network).
    private static func store(
        _ made: MadeFiles, in store: MediaStore,
        deadline: ContinuousClock.Instant
    ) throws -> StoredFiles {
        var stored = StoredFiles()
        switch made.attachment {
        case let .encoded(image)?:
            stored.attachment = try store.put(
                image.bytes, format: image.format, width: image.width,
                height: image.height, deadline: deadline)
        case let .file(file)?:
            stored.attachment = try store.adopt(
                file.path, format: file.format, width: file.width,
                height: file.height, sha256: file.sha256, deadline: deadline)
        case nil:
            break
        }
        stored.thumbnail = try made.thumbnail.map {
            try store.put($0.bytes, format: .jpeg, width: $0.width, height: $0.height, deadline: deadline)
        }
        // The icon is put without a deadline.
        stored.icon = try made.icon.map {
            try store.put($0.bytes, format: $0.format, width: $0.width, height: $0.height)
        }
        stored.poster = try made.poster.map {
            try store.put($0.bytes, format: $0.format, width: $0.width, height: $0.height, deadline: deadline)
        }
        return stored
    }

    /// Records the cache entry for what was stored.
    private func recordEntry(_ job: inout JobContext) async throws -> JobResult.Kind? {
        let entry = try job.entry(freshness: config.freshness, now: store.clock.now)
        if await fenced(job) { return .superseded }
        let key = job.key
        let deadline = job.deadline
        try await io.run { [store] in try store.record(entry, key: key, deadline: deadline) }
        return .ready(entry)
    }

    /// Records `previous` again with the lifetime the origin's answer gives it.
    private func renew(
        _ previous: CacheEntry, _ validators: OriginValidators,
        job: JobContext
    ) async throws -> JobResult.Kind {
        var renewed = previous.renewed(validators, policy: config.freshness, now: store.clock.now)
        // An entry written before entries recorded their source learns it now.
        renewed.sourceID = renewed.sourceID ?? MediaStore.sourceID(job.source.identity)
        let entry = renewed
        if await fenced(job) { return .superseded }
        let key = job.key
        let deadline = job.deadline
        try await io.run { [store] in try store.record(entry, key: key, deadline: deadline) }
        return .renewed(entry)
    }

    /// Whether the job's fleet lease is lost (checked just before its entry is recorded): a node
    /// taken for dead while it worked leaves the entry to the node that took its lease over. The
    /// files it put are content-addressed and unreferenced; the store's collection removes them.
    private func fenced(_ job: JobContext) async -> Bool {
        guard let lease = job.lease, await lease.confirm() == .lost else { return false }
        // Its span: the refusal shows in the job's trace.
        let span = PipelineTrace.child("pushmedia.fleet.fenced")
        span?.setAttribute("pushmedia.fleet.epoch", lease.epoch)
        span?.end()
        return true
    }

    /// A library's message without the store's work files in it (libvips names the file it read):
    /// the payload's label and URL already say which media it is.
    static func withoutWorkPaths(_ message: String, _ temporary: String) -> String {
        var text = message.replacingOccurrences(of: temporary + ".tiff", with: "the fetched file")
            .replacingOccurrences(of: temporary, with: "the fetched file")
        // The same file under another spelling of its path (libvips may normalise it).
        while let marker = text.range(of: "/.incoming/") {
            let start =
                text[..<marker.lowerBound].lastIndex(where: { $0 == " " || $0 == "\"" || $0 == "(" })
                .map { text.index(after: $0) } ?? text.startIndex
            let end =
                text[marker.upperBound...]
                .firstIndex(where: { $0 == " " || $0 == ":" || $0 == "\"" || $0 == ")" }) ?? text.endIndex
            text.replaceSubrange(start..<end, with: "the fetched file")
        }
        return text
    }
}
