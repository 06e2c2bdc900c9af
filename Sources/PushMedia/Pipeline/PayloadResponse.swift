/// What a job had achieved when its payload's budget ran out.
struct JobProgress: Sendable {
    /// False while the job waits in the queue for a slot.
    var started = false
    /// Set while another node of the fleet makes the media (this node waits for its word).
    var elsewhere = false
    var sniff: SniffResult?
    var sourceBytes: Int64?
    var thumbnail: StoredFile?
}

/// The answer for one media reference, for each way its processing can end: what to write at
/// the reference, the descriptor for the phone, and the reference's outcome.
struct SlotAnswer: Sendable {
    let slot: MediaSlot
    let baseURL: String
    let onReject: OnReject
    /// Where the payload came from, named in messages.
    let label: String?
    /// `--thumb-hidden`.
    let hidden: Bool
    var outcome: MediaOutcome
    var media: PayloadRewriter.Media = .keep
    var descriptor: Descriptor?
    var typeValue: String?
    var icon: String?
    /// A computed clipping rectangle (written into the vendor's options where it has a place).
    var clip: ClipRect?
    var timings: StageTimings?
    /// Until when (Unix seconds) the accepted cache entry is fresh, for answers kept ready.
    var freshUntil: Int64?
    /// The accepted cache entry's key and attachment, for answers kept ready.
    var used: UsedEntry?

    init(slot: MediaSlot, baseURL: String, onReject: OnReject, label: String?, hidden: Bool) {
        self.slot = slot
        self.baseURL = baseURL
        self.onReject = onReject
        self.label = label
        self.hidden = hidden
        outcome = MediaOutcome(path: slot.target.description, platform: slot.platform.id, status: .skipped)
        outcome.sourceURL = slot.value.stringValue
        outcome.template = slot.template.map(TemplateInfo.init)
    }

    var edit: PayloadRewriter.Edit {
        PayloadRewriter.Edit(slot: slot, media: media, typeValue: typeValue, icon: icon, clip: clip)
    }
    var isIOS: Bool { slot.platform.id == PlatformProfile.ios.id }

    /// "file: url", prefixed to messages.
    private var place: String {
        [label, slot.value.stringValue.map(Self.abbreviate)].compactMap { $0 }.joined(separator: ": ")
    }

    func placed(_ message: String) -> String { place.isEmpty ? message : "\(place): \(message)" }

    private func url(of file: StoredFile) -> String { baseURL + "/" + file.name }

    private func info(_ file: StoredFile) -> AttachmentInfo {
        AttachmentInfo(
            url: url(of: file), mime: file.mime, uti: file.uti, bytes: file.bytes, width: file.width,
            height: file.height)
    }

    /// Nothing done: the reference stays as it is.
    mutating func skipped(_ reason: String, message: String) {
        outcome.status = .skipped
        outcome.reason = reason
        outcome.message = placed(message)
        media = .keep
        descriptor = nil
    }

    /// An iOS reference in a payload without alert text: the service extension would never run.
    mutating func skippedForNoAlert() {
        skipped(
            ReasonCode.noAlert, message: "no aps.alert: the iOS service extension only runs for alert notifications")
    }

    /// A page past its template's maximum count: removed with its keys, never fetched.
    mutating func pastTemplateMaximum() {
        guard let role = slot.template else { return }
        rejected(
            ReasonCode.tooManyPages,
            message: "\(role.spec.source) takes at most \(role.spec.maximum) images: this one, page \(role.page ?? 0) "
                + "of \(role.template), is removed with its keys")
        media = .remove
    }

    /// Rejected media: the reference is removed (or kept with `--on-reject keep`) and the
    /// descriptor says why.
    mutating func rejected(_ reason: String, message: String, sniffed: MediaFormat? = nil) {
        outcome.status = .rejected
        outcome.reason = reason
        outcome.message = placed(message)
        outcome.attachment = nil
        outcome.thumbnail = nil
        outcome.icon = nil
        outcome.hints = nil
        outcome.template?.decodedBytes = nil
        media = onReject == .drop ? .remove : .keep
        typeValue =
            media == .keep && sniffed.map({ $0.kind != .unsupported }) == true
            ? sniffed.flatMap { slot.typeField?.value(for: $0) } : nil
        icon = nil
        clip = nil
        descriptor = Descriptor(status: .rejected, reason: reason, type: sniffed?.uti, mime: sniffed?.mime)
    }

    /// A finished result (fresh or cached) recorded under `key`, for a `remote` source or not: the
    /// stored attachment replaces the media URL.
    mutating func accepted(_ entry: CacheEntry, key: String, remote: Bool) {
        used = UsedEntry(key: key, attachment: entry.attachment.name, remote: remote)
        let attachment = entry.attachment
        outcome.status = entry.status == .passthrough ? .passthrough : .processed
        outcome.reason = nil
        outcome.message = nil
        outcome.sourceMIME = entry.sourceMIME
        outcome.sourceBytes = entry.sourceBytes
        outcome.attachment = info(attachment)
        outcome.thumbnail = entry.thumbnail.map(info)
        outcome.icon = entry.icon.map(info)
        if let role = slot.template, let width = attachment.width, let height = attachment.height {
            outcome.template?.decodedBytes = Int64(width) * Int64(height) * 4 * Int64(role.frames)
        }
        // The payload's own options win over computed ones.
        let given = slot.givenHints
        let hints = ThumbnailHints(
            clip: given?.clip ?? entry.clip, hidden: given?.hidden ?? (hidden ? true : nil),
            frame: entry.frame, time: given?.time)
        outcome.hints = hints.isEmpty ? nil : hints
        clip = given?.clip == nil ? entry.clip : nil
        media = .replace(with: url(of: attachment))
        icon = entry.icon.map(url(of:))
        typeValue = MediaFormat.stored(attachment).map { slot.typeField?.value(for: $0) } ?? nil
        descriptor = Descriptor(
            status: outcome.status, type: attachment.uti, mime: attachment.mime, bytes: attachment.bytes,
            width: attachment.width, height: attachment.height, thumb: entry.thumbnail.map(url(of:)),
            hints: outcome.hints, icon: icon)
        freshUntil = entry.freshUntil
        if entry.status == .bestAttempt {
            outcome.status = .bestAttempt
            outcome.reason = entry.reason
            outcome.message = entry.message.map(placed)
            descriptor?.status = .bestAttempt
            descriptor?.reason = entry.reason
        } else if let message = entry.message {
            // Delivered, with something given up on the way (a cut video, an unusable colour
            // profile, an animation frame that does not decode): a warning of the outcome.
            outcome.message = placed(message)
        }
    }

    /// The cached result is past its freshness lifetime and could not be renewed in time (or the
    /// origin failed): it goes out as the best attempt, with why.
    mutating func stale(_ entry: CacheEntry, why: String) {
        accepted(entry, key: "", remote: false)
        used = nil
        outcome.status = .bestAttempt
        outcome.reason = ReasonCode.stale
        outcome.message = placed("\(why); the cached attachment, past its freshness lifetime, is used")
        outcome.cacheHit = true
        descriptor?.status = .bestAttempt
        descriptor?.reason = ReasonCode.stale
        freshUntil = nil
    }

    /// The budget ran out (or the store failed, `reason` `store_unavailable`): the thumbnail (or a
    /// video's poster frame) if one is stored; else the original URL with the sniffed type if known;
    /// else the reference unchanged.
    mutating func bestAttempt(
        _ progress: JobProgress, reason: String = ReasonCode.budgetExceeded, why: String = "the budget ran out"
    ) {
        guard progress.started || progress.elsewhere else {
            return overloaded("the budget ran out while the job waited for a free slot")
        }
        let why = progress.started ? why : "\(why) while another node of the fleet made the media"
        outcome.waitedForFleet = !progress.started
        outcome.status = .bestAttempt
        outcome.reason = reason
        if let sniff = progress.sniff {
            outcome.sourceMIME = sniff.format.mime
            outcome.sourceBytes = progress.sourceBytes
        }
        if let thumbnail = progress.thumbnail {
            outcome.message = placed("\(why); the thumbnail was ready and is the attachment")
            outcome.attachment = info(thumbnail)
            media = .replace(with: url(of: thumbnail))
            typeValue = slot.typeField?.value(for: .jpeg)
            descriptor = Descriptor(
                status: .bestAttempt, reason: reason, type: thumbnail.uti, mime: thumbnail.mime,
                bytes: thumbnail.bytes, width: thumbnail.width, height: thumbnail.height)
            return
        }
        if let format = progress.sniff?.format, format.kind != .unsupported {
            outcome.message = placed("\(why); the original URL is kept with the sniffed type \(format.mime)")
            media = .keep
            typeValue = slot.typeField?.value(for: format)
            descriptor = Descriptor(status: .bestAttempt, reason: reason, type: format.uti, mime: format.mime)
            return
        }
        outcome.message = placed(
            reason == ReasonCode.budgetExceeded
                ? "the budget ran out before the media's type was known; the reference is unchanged"
                : "\(why); the reference is unchanged")
        media = .keep
        descriptor = nil
    }

    /// Too much work at once: answered at once, reference unchanged, so the push still goes out.
    mutating func overloaded(_ why: String) {
        outcome.status = .bestAttempt
        outcome.reason = ReasonCode.overloaded
        outcome.message = placed("\(why); the reference is unchanged")
        media = .keep
        descriptor = nil
    }

    static func abbreviate(_ url: String) -> String {
        url.count <= 200 ? url : String(url.prefix(120)) + "…(\(url.utf8.count) bytes)"
    }
}

extension MediaFormat {
    /// The format of a stored file, from its MIME type.
    static func stored(_ file: StoredFile) -> MediaFormat? {
        byMagicMIME[file.mime]
    }
}

/// Builds the answer for one payload from the answers for its media references: the rewritten
/// payload (which always keeps the input's text) and its outcome.
struct PayloadResponse: Sendable {
    let payload: JSONObject
    let vendor: Vendor
    let start: ContinuousClock.Instant
    /// Where the payload came from, named in messages.
    let label: String?
    var outcome = Outcome(status: .skipped)
    var freshUntil: Int64?
    var used: [UsedEntry] = []

    init(payload: JSONObject, vendor: Vendor, label: String?, start: ContinuousClock.Instant = .now) {
        self.payload = payload
        self.vendor = vendor
        self.label = label
        self.start = start
        outcome.vendor = vendor.rawValue
    }

    /// The payload as it came, with `status` and `reason` (no reference was processed).
    mutating func unchanged(_ status: OutcomeStatus, reason: String, message: String, answers: [SlotAnswer] = [])
        -> PipelineResult
    {
        outcome.status = status
        outcome.reason = reason
        outcome.message =
            [label, answers.first?.slot.value.stringValue.map(SlotAnswer.abbreviate)].compactMap { $0 }
            .joined(separator: ": ").nonEmpty.map { "\($0): \(message)" } ?? message
        if let first = answers.first {
            outcome.mediaKey = first.outcome.path
            outcome.sourceURL = first.outcome.sourceURL
            outcome.media = answers.map(\.outcome)
        }
        return result(nil)
    }

    /// Rewrites the payload with every reference's answer. Should the attachment URLs not fit
    /// APNs' limit, the references are rejected with `payload_too_large` instead.
    mutating func finish(_ answers: [SlotAnswer]) -> PipelineResult {
        var answers = answers
        var rewritten = rewrite(answers)
        if rewritten == nil {
            var changed = false
            for index in answers.indices {
                guard case .replace = answers[index].media else { continue }
                answers[index].rejected(
                    "payload_too_large",
                    message:
                        "with the attachment URL the payload would exceed APNs' \(PayloadRewriter.apnsLimit)-byte "
                        + "limit; shorten its text or custom data, or use a shorter --base-url"
                )
                changed = true
            }
            if changed { rewritten = rewrite(answers) }
        }
        freshUntil = answers.compactMap(\.freshUntil).min()
        used = answers.compactMap { $0.outcome.status.delivered ? $0.used : nil }
        // By index: a reference's answer is large, and one copied is one retained field by field.
        guard let primary = answers.firstIndex(where: \.isIOS) ?? answers.indices.first else {
            return result(rewritten)
        }
        outcome.primary = answers[primary].outcome
        if let timings = answers[primary].timings { outcome.timingsMs = timings }
        outcome.media = answers.map(\.outcome)
        // What a delivered reference gave up on the way is a warning, not the outcome's message.
        let notes = answers.compactMap { $0.outcome.status.delivered ? $0.outcome.message : nil }
        if outcome.status.delivered { outcome.message = nil }
        if !notes.isEmpty { outcome.warnings = (outcome.warnings ?? []) + notes }
        let failed = answers.indices.compactMap { index in
            answers[index].outcome.status == .rejected && answers[index].slot != answers[primary].slot
                ? "\(answers[index].outcome.path) (\(answers[index].outcome.reason ?? "rejected"))" : nil
        }
        if !failed.isEmpty {
            outcome.warnings =
                (outcome.warnings ?? [])
                + ["\(failed.count) of \(answers.count) media references rejected: \(failed.joined(separator: ", "))"]
        }
        return result(rewritten)
    }

    /// The descriptor: the first iOS reference's, with one item per iOS reference when there are several.
    private func descriptor(_ answers: [SlotAnswer]) -> Descriptor? {
        guard let first = answers.firstIndex(where: { $0.isIOS && $0.descriptor != nil }),
            var descriptor = answers[first].descriptor
        else { return nil }
        guard answers.count > 1 else { return descriptor }
        let items = answers.compactMap { answer in
            answer.isIOS
                ? Descriptor.Item(
                    path: answer.outcome.path, status: answer.outcome.status, type: answer.descriptor?.type)
                : nil
        }
        if items.count > 1 { descriptor.items = items }
        return descriptor
    }

    private func rewrite(_ answers: [SlotAnswer]) -> PayloadRewriter.Rewritten? {
        PayloadRewriter.rewrite(payload, edits: answers.map(\.edit), vendor: vendor, descriptor: descriptor(answers))
    }

    private mutating func result(_ rewritten: PayloadRewriter.Rewritten?) -> PipelineResult {
        let result = rewritten?.payload ?? payload
        let bytes = rewritten?.bytes ?? JSONValue.object(payload).serialized()
        if let notes = rewritten?.notes, !notes.isEmpty { outcome.warnings = (outcome.warnings ?? []) + notes }
        if let dropped = rewritten?.droppedFields, !dropped.isEmpty {
            outcome.warnings =
                (outcome.warnings ?? []) + [
                    "trimmed to fit APNs' \(PayloadRewriter.apnsLimit) bytes: dropped "
                        + "\(dropped.joined(separator: ", "))"
                ]
        }
        outcome.payloadBytes = bytes.count
        outcome.timingsMs.total = start.millisecondsElapsed
        return PipelineResult(payload: result, bytes: bytes, outcome: outcome, freshUntil: freshUntil, used: used)
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
