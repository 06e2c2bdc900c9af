import Foundation
import Tracing

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
        if slots.contains(where: { $0.template != nil }) || vendor == .generic {
            let problems = Templates.problems(in: payload)
            if !problems.isEmpty { response.outcome.warnings = problems }
        }
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
            return .done(rewritten(response, answers))
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
            if planned.answers[index].slot.template?.excess == true {
                planned.answers[index].pastTemplateMaximum()
                continue
            }
            if planned.answers[index].isIOS && !planned.hasAlert {
                planned.answers[index].skippedForNoAlert()
                continue
            }
            let source = slotSource(planned.answers[index].slot, context: context)
            if !context.refresh, case let .success(slot) = source,
                let entry = store.rememberedFresh(key: slot.key, remote: slot.source.isRemote)
            {
                if let span = PipelineTrace.child(PipelineTrace.resolve) {
                    PipelineTrace.record(
                        .ready(entry, cacheHit: true), profile: planned.answers[index].slot.platform,
                        source: slot.source, on: span)
                    span.end()
                }
                planned.answers[index].outcome.cacheHit = true
                planned.answers[index].accepted(entry, key: slot.key, remote: slot.source.isRemote)
                continue
            }
            planned.pending.append((index, source))
        }
        if planned.pending.isEmpty { return .done(rewritten(planned.response, planned.answers)) }
        return .pending(PendingPayload(slots: planned, context: context))
    }

    /// The second half of `process`: the references `begin` left, each through the cache or a
    /// (shared) job, at once, sharing one deadline.
    public func finish(_ pending: PendingPayload) async -> PipelineResult {
        let response = pending.slots.response
        var answers = pending.slots.answers
        let (deadline, context) = (pending.slots.deadline, pending.context)
        let left = pending.slots.pending
        // One reference needs no child task.
        if left.count == 1 {
            await processSlot(&answers[left[0].index], source: left[0].source, context: context, deadline: deadline)
            return rewritten(response, answers)
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
        return rewritten(response, answers)
    }

    /// The payload rewritten with its answers, in its span (`pushmedia.rewrite`).
    private func rewritten(_ response: PayloadResponse, _ answers: [SlotAnswer]) -> PipelineResult {
        var response = response
        let span = PipelineTrace.child(PipelineTrace.rewrite)
        defer { span?.end() }
        return response.finish(answers)
    }

    /// Whether an answer made from the cache entries `used` still holds: each is remembered fresh
    /// with the same attachment (`begin`'s check, `MediaStore.rememberedFresh`, at its one
    /// interval, `MediaStore.checkEvery`). For answers kept ready.
    public func stillRemembered(_ used: [UsedEntry]) -> Bool {
        used.allSatisfy { used in
            store.rememberedFresh(key: used.key, remote: used.remote)?.attachment.name == used.attachment
        }
    }

    /// Processes every media reference of `payload`: `begin`, then `finish`.
    /// In its span (`pushmedia.payload`), which records the outcome (`PipelineTrace.record`).
    func processPayload(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) async -> PipelineResult {
        let span = PipelineTrace.child(PipelineTrace.payload)
        defer { span?.end() }
        let result = await PipelineTrace.within(span) { () async -> PipelineResult in
            switch begin(payload, context: context, sizeAtMost: sizeAtMost) {
            case let .done(result): return result
            case let .pending(pending): return await finish(pending)
            }
        }
        if let span { PipelineTrace.record(result.outcome, budget: context.budget ?? config.budget, on: span) }
        return result
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
            let options = fingerprint(of: slot.platform) + (posterTime.map { ";poster=\($0)" } ?? "")
            return SlotSource(
                source: source, key: MediaStore.cacheKey(source: source.identity, options: options),
                posterTime: posterTime)
        }
    }

    /// Processes one media reference: its source resolved (`resolve`), the resolution made its answer.
    private func processSlot(
        _ answer: inout SlotAnswer, source: Result<SlotSource, Failure>, context: PayloadContext,
        deadline: ContinuousClock.Instant
    ) async {
        let slot: SlotSource
        switch source {
        case let .success(resolved): slot = resolved
        case let .failure(failure): return answer.rejected(failure.reason, message: failure.message)
        }
        let (resolution, timings) = await resolve(
            MediaRequest(
                key: slot.key, source: slot.source, profile: answer.slot.platform, posterTime: slot.posterTime,
                refresh: context.refresh, deadline: deadline))
        if let timings { answer.timings = timings }
        answer.resolved(resolution, key: slot.key, remote: slot.source.isRemote)
    }
}

extension SlotAnswer {
    /// The answer for how its media's request ended.
    mutating func resolved(_ resolution: Pipeline.Resolution, key: String, remote: Bool) {
        switch resolution {
        case let .ready(entry, cacheHit):
            outcome.cacheHit = cacheHit
            accepted(entry, key: key, remote: remote)
        case let .renewed(entry):
            accepted(entry, key: key, remote: remote)
            outcome.cacheHit = true
            outcome.revalidated = true
        case let .stale(entry, why):
            stale(entry, why: why)
        case let .failed(reason, message, progress):
            outcome.cacheHit = false
            if let sniff = progress.sniff {
                outcome.sourceMIME = sniff.format.mime
                outcome.sourceBytes = progress.sourceBytes
            }
            rejected(reason, message: message, sniffed: progress.sniff?.format)
        case let .notReady(progress):
            outcome.cacheHit = false
            bestAttempt(progress)
        case let .overloaded(why):
            outcome.cacheHit = false
            overloaded(why)
        case let .storeUnavailable(why, progress):
            // Without the store nothing can be kept or served: the original reference goes out.
            if progress != nil { outcome.cacheHit = false }
            bestAttempt(progress ?? JobProgress(started: true), reason: ReasonCode.storeUnavailable, why: why)
        }
    }
}
