import Foundation

extension Pipeline {
    /// A payload ready for its media references to be processed, or its result when none needs it.
    private enum Plan {
        case done(PipelineResult)
        case slots(Slots)
    }

    /// The response under way, one answer per media reference, and what processing them needs.
    struct Slots: Sendable {
        var response: PayloadResponse
        var answers: [SlotAnswer]
        var hasAlert: Bool
        var deadline: ContinuousClock.Instant
        /// The references left for `finish`, with their sources.
        var pending: [(index: Int, source: Result<SlotSource, Failure>)] = []
    }

    /// The checks before any media reference is processed: which references there are, whether the
    /// service extension would run, whether the payload is already over APNs' limit.
    /// `sizeAtMost`: the length of the text the payload was parsed from, which its compact
    /// encoding never exceeds (spares measuring the payload when that is under APNs' limit).
    private func plan(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) -> Plan {
        let profile = context.profile ?? config.profile
        let (vendor, slots) =
            if let chosen = context.vendor ?? config.vendor {
                (chosen, chosen.slots(in: payload, extraKeys: config.extraMediaKeys, profile: profile))
            } else {
                Vendor.detected(in: payload, extraKeys: config.extraMediaKeys, profile: profile)
            }
        var response = PayloadResponse(payload: payload, vendor: vendor, label: context.label)
        let deadline = context.deadline ?? response.start + (context.budget ?? config.budget)

        guard !slots.isEmpty else {
            let keys =
                vendor == .generic
                ? (MediaLocator.builtInKeys + config.extraMediaKeys).joined(separator: ", ") : vendor.keysDescription
            return .done(
                response.unchanged(
                    .skipped, reason: ReasonCode.noMedia,
                    message: "no media reference (\(vendor.rawValue) keys: \(keys))"))
        }
        var answers = slots.map {
            SlotAnswer(
                slot: $0, baseURL: context.baseURL ?? config.baseURL,
                onReject: context.onReject ?? config.onReject, label: context.label,
                hidden: config.thumbnailHidden)
        }
        // Only the iOS service extension needs alert text; other platforms show the image anyway.
        let hasAlert = vendor.hasAlert(payload)
        if !hasAlert && answers.allSatisfy(\.isIOS) {
            response.outcome.warnings = [
                "the payload asks for media but has no aps.alert: the Notification Service Extension never runs for it"
            ]
            return .done(
                response.unchanged(
                    .skipped, reason: ReasonCode.noAlert,
                    message: "no aps.alert: the service extension only runs for alert notifications, "
                        + "so the media would never be shown", answers: answers))
        }
        if sizeAtMost.map({ $0 > PayloadRewriter.apnsLimit }) ?? true,
            case let inputSize = JSONValue.object(payload).compactByteCount, inputSize > PayloadRewriter.apnsLimit
        {
            let message =
                "the payload is \(inputSize) bytes before any change, over APNs' "
                + "\(PayloadRewriter.apnsLimit)-byte limit; shorten its text or custom data"
            for index in answers.indices { answers[index].rejected(ReasonCode.payloadTooLarge, message: message) }
            return .done(response.finish(answers))
        }
        return .slots(Slots(response: response, answers: answers, hasAlert: hasAlert, deadline: deadline))
    }

    /// The first half of `process`, synchronous: every answer that needs no job (no media, no alert
    /// text for the service extension, a payload already over APNs' limit, an iOS reference in a
    /// payload without alert, media the store remembers fresh). The result when nothing is left
    /// for a job; otherwise what `finish` needs to process the references left.
    public func begin(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) -> PipelineStart {
        var planned: Slots
        switch plan(payload, context: context, sizeAtMost: sizeAtMost) {
        case let .done(result): return .done(result)
        case let .slots(slots): planned = slots
        }
        for index in planned.answers.indices {
            if planned.answers[index].isIOS && !planned.hasAlert {
                planned.answers[index].skippedForNoAlert()
                continue
            }
            let source = slotSource(planned.answers[index].slot, context: context)
            if !context.refresh, case let .success(slot) = source, let entry = store.remembered(key: slot.key),
                entry.isFresh(remote: slot.source.isRemote)
            {
                planned.answers[index].outcome.cacheHit = true
                planned.answers[index].accepted(entry, key: slot.key)
                continue
            }
            planned.pending.append((index, source))
        }
        if planned.pending.isEmpty { return .done(planned.response.finish(planned.answers)) }
        return .pending(PendingPayload(slots: planned, context: context))
    }

    /// The result at once when `begin` needs no job for `payload` (a campaign's payloads after its
    /// job, among others); nil when one is needed.
    public func processRemembered(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) -> PipelineResult? {
        if case let .done(result) = begin(payload, context: context, sizeAtMost: sizeAtMost) { return result }
        return nil
    }

    /// The second half of `process`: the references `begin` left, each through the cache or a
    /// (shared) job, at once, sharing one deadline.
    public func finish(_ pending: PendingPayload) async -> PipelineResult {
        var response = pending.slots.response
        var answers = pending.slots.answers
        let (deadline, context) = (pending.slots.deadline, pending.context)
        let left = pending.slots.pending
        // One reference needs no child task.
        if left.count == 1 {
            await processSlot(&answers[left[0].index], source: left[0].source, context: context, deadline: deadline)
            return response.finish(answers)
        }
        answers = await withTaskGroup(of: (Int, SlotAnswer).self) { group in
            for (index, source) in left {
                group.addTask { [answer = answers[index]] in
                    var answer = answer
                    await self.processSlot(&answer, source: source, context: context, deadline: deadline)
                    return (index, answer)
                }
            }
            var done = answers
            for await (index, answer) in group { done[index] = answer }
            return done
        }
        return response.finish(answers)
    }

    /// Whether an answer made from the cache entries `used` still holds: each is remembered fresh
    /// with the same attachment (the one check of `begin`'s, at its one interval,
    /// `MediaStore.checkEvery`). For answers kept ready.
    public func stillRemembered(_ used: [UsedEntry]) -> Bool {
        used.allSatisfy { used in
            guard let entry = store.remembered(key: used.key) else { return false }
            return entry.attachment.name == used.attachment && entry.isFresh(remote: entry.freshUntil != nil)
        }
    }

    /// Processes every media reference of `payload`: `begin`, then `finish`.
    func processPayload(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) async -> PipelineResult {
        switch begin(payload, context: context, sizeAtMost: sizeAtMost) {
        case let .done(result): return result
        case let .pending(pending): return await finish(pending)
        }
    }

    /// Where a media reference's bytes come from and its cache key.
    struct SlotSource: Sendable {
        var source: Source
        var key: String
        var posterTime: Double?
    }

    /// The source and cache key of a media reference, or why it has none.
    private func slotSource(_ slot: MediaSlot, context: PayloadContext) -> Result<SlotSource, Failure> {
        resolveSource(slot, context: context).map { source in
            // A thumbnail time given with the media (Airship's `time`) picks a video's poster frame:
            // part of the key, so results for other times are not shared.
            let posterTime = slot.givenHints?.time.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
            let options =
                (fingerprints[slot.platform.id] ?? optionsFingerprint)
                + (posterTime.map { ";poster=\($0)" } ?? "")
            return SlotSource(
                source: source, key: MediaStore.cacheKey(source: source.identity, options: options),
                posterTime: posterTime)
        }
    }

    /// Processes one media reference: source → cache or (shared) job, raced against the deadline.
    private func processSlot(
        _ answer: inout SlotAnswer, source: Result<SlotSource, Failure>, context: PayloadContext,
        deadline: ContinuousClock.Instant
    ) async {
        let slot: SlotSource
        switch source {
        case let .success(resolved): slot = resolved
        case let .failure(failure): return answer.rejected(failure.reason, message: failure.message)
        }
        let cached: CacheEntry?
        let stale: CacheEntry?
        do {
            (cached, stale) = try await lookup(
                key: slot.key, remote: slot.source.isRemote, refresh: context.refresh,
                deadline: deadline)
        } catch {
            // Without the store nothing can be kept or served: the original reference goes out.
            return answer.bestAttempt(
                JobProgress(started: true), reason: ReasonCode.storeUnavailable,
                why: "the store cannot be read (\(error))")
        }
        if let entry = cached {
            answer.outcome.cacheHit = true
            return answer.accepted(entry, key: slot.key)
        }
        answer.outcome.cacheHit = false

        // Race the (possibly shared) job against the deadline; the first to finish answers.
        guard
            let job = sharedJob(
                key: slot.key, source: slot.source, profile: answer.slot.platform, posterTime: slot.posterTime,
                previous: stale,
                refresh: context.refresh, deadline: deadline + config.backgroundLimit)
        else {
            let why = "\(gate?.limit ?? 0) jobs are running and \(gate?.queueLimit ?? 0) are queued"
            if let stale { return answer.stale(stale, why: why) }
            return answer.overloaded(why)
        }
        let result = await Self.race(job, deadline: deadline)
        if let result { answer.timings = result.timings }
        answer.jobEnded(result?.kind, key: slot.key, progress: job.progress.withLock { $0 }, stale: stale)
    }

    /// The cached entry for `key` if fresh, else the stale one (to revalidate). A fresh entry in
    /// memory answers at once; a stale one is looked up again in the index, where another node
    /// may have renewed it.
    func lookup(
        key: String, remote: Bool, refresh: Bool,
        deadline: ContinuousClock.Instant
    ) async throws -> (fresh: CacheEntry?, stale: CacheEntry?) {
        if let entry = store.remembered(key: key), !refresh && entry.isFresh(remote: remote) { return (entry, nil) }
        // One read of the index (a file, or a GET): on the fetch threads, not behind transcodes.
        let entry = try await io.run { [store] in try store.lookup(key: key, fromIndex: true, deadline: deadline) }
        if let entry, refresh || !entry.isFresh(remote: remote) { return (nil, entry) }
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

    /// Failures that say the origin could not be asked, not what it holds.
    static func originUnavailable(_ reason: String) -> Bool {
        ReasonCode.originUnavailable.contains(reason)
    }
}

extension SlotAnswer {
    /// The answer for how a job ended (nil: the deadline came first), with what it had achieved
    /// and the stale entry it was revalidating, if any.
    mutating func jobEnded(_ kind: Pipeline.JobResult.Kind?, key: String, progress: JobProgress, stale: CacheEntry?) {
        switch kind {
        case let .ready(entry)?:
            accepted(entry, key: key)
        case let .renewed(entry)?:
            accepted(entry, key: key)
            outcome.cacheHit = true
            outcome.revalidated = true
        case let .failed(reason, message)? where stale != nil && Pipeline.originUnavailable(reason):
            // Stale if error (RFC 5861): an origin that is down is no reason to lose a good
            // attachment. What it answers (a 404, bytes that are no image) still counts.
            self.stale(stale!, why: "revalidating with the origin failed (\(message))")
        case let .failed(reason, message)?:
            if let sniff = progress.sniff {
                outcome.sourceMIME = sniff.format.mime
                outcome.sourceBytes = progress.sourceBytes
            }
            rejected(reason, message: message, sniffed: progress.sniff?.format)
        case let .storeUnavailable(message)?:
            bestAttempt(progress, reason: ReasonCode.storeUnavailable, why: "the store cannot be written (\(message))")
        case .budgetExceeded?, nil:
            if let stale { return self.stale(stale, why: "the budget ran out while revalidating with the origin") }
            bestAttempt(progress)
        }
    }
}
