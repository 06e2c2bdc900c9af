/// What a job had achieved when its payload's budget ran out.
struct JobProgress: Sendable {
    /// False while the job waits in the queue for a slot.
    var started = false
    var sniff: SniffResult?
    var sourceBytes: Int64?
    var thumbnail: StoredFile?
}

/// Builds the answer for one payload, for each way its processing can end: the rewritten
/// payload (which always keeps the input's text) and its outcome.
struct PayloadResponse {
    let payload: JSONObject
    let baseURL: String
    let onReject: OnReject
    let start: ContinuousClock.Instant
    /// Where the payload came from, named in messages.
    let label: String?
    var outcome = Outcome(status: .skipped)
    private(set) var reference: MediaReference?

    init(payload: JSONObject, baseURL: String, onReject: OnReject, label: String?, start: ContinuousClock.Instant = .now) {
        self.payload = payload
        self.baseURL = baseURL
        self.onReject = onReject
        self.label = label
        self.start = start
    }

    /// Records the media reference the answer is about.
    mutating func found(_ reference: MediaReference) {
        self.reference = reference
        outcome.mediaKey = reference.key
        outcome.sourceURL = reference.value.stringValue
    }

    /// "file: url", prefixed to messages.
    private var place: String {
        [label, reference?.value.stringValue.map(Self.abbreviate)].compactMap { $0 }.joined(separator: ": ")
    }

    private func placed(_ message: String) -> String { place.isEmpty ? message : "\(place): \(message)" }

    private func url(of file: StoredFile) -> String { baseURL + "/" + file.name }

    private func info(_ file: StoredFile) -> AttachmentInfo {
        AttachmentInfo(url: url(of: file), mime: file.mime, uti: file.uti, bytes: file.bytes, width: file.width, height: file.height)
    }

    /// The payload as it came, with `status` and `reason`.
    mutating func unchanged(_ status: OutcomeStatus, reason: String, message: String) -> PipelineResult {
        outcome.status = status
        outcome.reason = reason
        outcome.message = placed(message)
        return finish(nil)
    }

    /// Rejected media: the media key is removed (or kept with `--on-reject keep`) and the
    /// descriptor says why.
    mutating func rejected(_ reason: String, message: String, sniffed: MediaFormat? = nil) -> PipelineResult {
        outcome.status = .rejected
        outcome.reason = reason
        outcome.message = placed(message)
        outcome.attachment = nil
        outcome.thumbnail = nil
        guard let key = reference?.key else { return finish(nil) }
        let descriptor = Descriptor(status: .rejected, reason: reason, type: sniffed?.uti, mime: sniffed?.mime)
        return finish(PayloadRewriter.rewrite(payload, mediaKey: key, media: onReject == .drop ? .remove : .keep, descriptor: descriptor))
    }

    /// A finished result (fresh or cached): the stored attachment replaces the media URL.
    mutating func accepted(_ entry: CacheEntry) -> PipelineResult {
        guard let key = reference?.key else { return finish(nil) }
        let attachment = entry.attachment
        outcome.status = entry.status == OutcomeStatus.passthrough.rawValue ? .passthrough : .processed
        outcome.reason = nil
        outcome.sourceMIME = entry.sourceMIME
        outcome.sourceBytes = entry.sourceBytes
        outcome.attachment = info(attachment)
        outcome.thumbnail = entry.thumbnail.map(info)
        let descriptor = Descriptor(status: outcome.status, type: attachment.uti, mime: attachment.mime, bytes: attachment.bytes,
                                    width: attachment.width, height: attachment.height, thumb: entry.thumbnail.map(url(of:)))
        guard let rewritten = PayloadRewriter.rewrite(payload, mediaKey: key, media: .replace(with: url(of: attachment)), descriptor: descriptor) else {
            return rejected("payload_too_large", message: "with the attachment URL the payload would exceed APNs' \(PayloadRewriter.apnsLimit)-byte limit; shorten its text or custom data, or use a shorter --base-url")
        }
        return finish(rewritten)
    }

    /// The budget ran out: the thumbnail if it is ready; else the original URL with the sniffed
    /// type if known; else the payload unchanged.
    mutating func bestAttempt(_ progress: JobProgress) -> PipelineResult {
        guard progress.started else { return overloaded("the budget ran out while the job waited for a free slot") }
        outcome.status = .bestAttempt
        outcome.reason = "budget_exceeded"
        if let sniff = progress.sniff {
            outcome.sourceMIME = sniff.format.mime
            outcome.sourceBytes = progress.sourceBytes
        }
        guard let key = reference?.key else { return finish(nil) }
        if let thumbnail = progress.thumbnail {
            outcome.message = placed("the budget ran out; the thumbnail was ready and is the attachment")
            outcome.attachment = info(thumbnail)
            let descriptor = Descriptor(status: .bestAttempt, reason: "budget_exceeded", type: thumbnail.uti, mime: thumbnail.mime,
                                        bytes: thumbnail.bytes, width: thumbnail.width, height: thumbnail.height)
            return finish(PayloadRewriter.rewrite(payload, mediaKey: key, media: .replace(with: url(of: thumbnail)), descriptor: descriptor))
        }
        if let format = progress.sniff?.format, format.kind != .unsupported {
            outcome.message = placed("the budget ran out; the original URL is kept with the sniffed type \(format.mime)")
            let descriptor = Descriptor(status: .bestAttempt, reason: "budget_exceeded", type: format.uti, mime: format.mime)
            return finish(PayloadRewriter.rewrite(payload, mediaKey: key, media: .keep, descriptor: descriptor))
        }
        outcome.message = placed("the budget ran out before the media's type was known; the payload is unchanged")
        return finish(nil)
    }

    /// Too much work at once: answered at once, payload unchanged, so the push still goes out.
    mutating func overloaded(_ why: String) -> PipelineResult {
        outcome.status = .bestAttempt
        outcome.reason = "overloaded"
        outcome.message = placed("\(why); the payload is unchanged")
        return finish(nil)
    }

    private mutating func finish(_ rewritten: PayloadRewriter.Rewritten?) -> PipelineResult {
        let result = rewritten?.payload ?? payload
        let bytes = rewritten?.bytes ?? JSONValue.object(payload).serialized()
        if let dropped = rewritten?.droppedFields, !dropped.isEmpty {
            outcome.warnings = (outcome.warnings ?? []) + ["trimmed to fit APNs' \(PayloadRewriter.apnsLimit) bytes: dropped \(dropped.joined(separator: ", "))"]
        }
        outcome.payloadBytes = bytes.count
        outcome.timingsMs.total = start.millisecondsElapsed
        return PipelineResult(payload: result, bytes: bytes, outcome: outcome)
    }

    static func abbreviate(_ url: String) -> String {
        url.count <= 200 ? url : String(url.prefix(120)) + "…(\(url.utf8.count) bytes)"
    }
}
