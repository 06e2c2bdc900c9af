import Foundation

extension Pipeline {
    /// A payload ready for its media references to be processed, or its result when none needs it.
    private enum Plan {
        case done(PipelineResult)
        case slots(Slots)
    }

    /// The response under way, one answer per media reference, and what processing them needs.
    private struct Slots {
        var response: PayloadResponse
        var answers: [SlotAnswer]
        var hasAlert: Bool
        var deadline: ContinuousClock.Instant
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

    /// The result at once when every media reference of `payload` has a fresh entry the store
    /// remembers (a campaign's payloads after its job): no task, no wait. Nil when one needs a
    /// lookup in the index or a job; then `process` does the whole work.
    public func processRemembered(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) -> PipelineResult? {
        var planned: Slots
        switch plan(payload, context: context, sizeAtMost: sizeAtMost) {
        case let .done(result): return result
        case let .slots(slots): planned = slots
        }
        guard !context.refresh else { return nil }
        for index in planned.answers.indices {
            if planned.answers[index].isIOS && !planned.hasAlert {
                planned.answers[index].skippedForNoAlert()
                continue
            }
            guard case let .success(slot) = slotSource(planned.answers[index].slot, context: context),
                let entry = store.remembered(key: slot.key), entry.isFresh(remote: slot.source.isRemote)
            else { return nil }
            planned.answers[index].outcome.cacheHit = true
            planned.answers[index].accepted(entry)
        }
        return planned.response.finish(planned.answers)
    }

    /// Processes every media reference of `payload` at once, sharing one deadline.
    func processPayload(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) async -> PipelineResult {
        let planned: Slots
        switch plan(payload, context: context, sizeAtMost: sizeAtMost) {
        case let .done(result): return result
        case let .slots(slots): planned = slots
        }
        var response = planned.response
        var answers = planned.answers
        let hasAlert = planned.hasAlert
        let deadline = planned.deadline
        // Every reference at once, sharing the deadline (one needs no child task).
        if answers.count == 1 {
            await answerSlot(&answers[0], hasAlert: hasAlert, context: context, deadline: deadline)
            return response.finish(answers)
        }
        answers = await withTaskGroup(of: (Int, SlotAnswer).self) { group in
            for (index, answer) in answers.enumerated() {
                group.addTask {
                    var answer = answer
                    await self.answerSlot(&answer, hasAlert: hasAlert, context: context, deadline: deadline)
                    return (index, answer)
                }
            }
            var done = answers
            for await (index, answer) in group { done[index] = answer }
            return done
        }
        return response.finish(answers)
    }

    /// One reference of a payload: skipped when it is for iOS and there is no alert, else processed.
    private func answerSlot(
        _ answer: inout SlotAnswer, hasAlert: Bool, context: PayloadContext,
        deadline: ContinuousClock.Instant
    ) async {
        if answer.isIOS && !hasAlert {
            answer.skippedForNoAlert()
        } else {
            await processSlot(&answer, context: context, deadline: deadline)
        }
    }

    /// Where a media reference's bytes come from and its cache key.
    private struct SlotSource {
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
        _ answer: inout SlotAnswer, context: PayloadContext,
        deadline: ContinuousClock.Instant
    ) async {
        let slot: SlotSource
        switch slotSource(answer.slot, context: context) {
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
            return answer.accepted(entry)
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
        answer.jobEnded(result?.kind, progress: job.progress.withLock { $0 }, stale: stale)
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
    mutating func jobEnded(_ kind: Pipeline.JobResult.Kind?, progress: JobProgress, stale: CacheEntry?) {
        switch kind {
        case let .ready(entry)?:
            accepted(entry)
        case let .renewed(entry)?:
            accepted(entry)
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
