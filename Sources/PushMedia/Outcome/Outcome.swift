/// How a payload came out.
public enum OutcomeStatus: String, Codable, Sendable, CaseIterable {
    /// The media was transcoded into an attachment the phone accepts.
    case processed
    /// The media already complied and was re-hosted byte for byte.
    case passthrough
    /// The budget ran out: the payload carries the best result ready at that moment.
    case bestAttempt = "best_attempt"
    /// The media cannot be used (see `reason`); the text is delivered without it.
    case rejected
    /// Nothing to do: no media reference, or no alert for the service extension to run on.
    case skipped

    /// The media goes out on the store's URL: `processed` or `passthrough`.
    public var delivered: Bool { self == .processed || self == .passthrough }
}

/// Milliseconds spent in each stage.
public struct StageTimings: Codable, Sendable, Equatable {
    public var fetch: Double = 0
    public var sniff: Double = 0
    public var transcode: Double = 0
    public var store: Double = 0
    public var total: Double = 0

    public init() {}
}

/// The report of one payload (`process --report`, `batch`'s `report.json`, the HTTP hook).
///
/// Its JSON is one flat object: the fields of `primary` (`status`, `reason`, `message`, `media_key`,
/// `source_url`, `source_mime`, `source_bytes`, `attachment`, `thumbnail`, `cache_hit`, `revalidated`)
/// beside the payload's own (`payload_bytes`, `warnings`, `timings_ms`, `vendor`, `media`).
public struct Outcome: Sendable, Equatable {
    /// The payload's status, reason and message, with its primary media reference (the first iOS
    /// one, else the first): where it is (`path`, written as `media_key`; empty when the payload
    /// has none), its source, attachment and thumbnail, and whether the cache answered. Its
    /// `platform`, `icon` and `hints` are not written at the top level: `media` has them.
    public var primary: MediaOutcome
    /// Size of the emitted payload in bytes (compact JSON, as sent to APNs).
    public var payloadBytes: Int = 0
    public var warnings: [String]?
    public var timingsMs = StageTimings()
    /// The payload convention read and written: `generic`, `fcm`, `onesignal`, `airship`, `braze`,
    /// `clevertap`, `iterable` or `customerio`.
    public var vendor: String?
    /// Every media reference of the payload, in payload order (`primary` is one of them).
    public var media: [MediaOutcome]?

    public init(status: OutcomeStatus, reason: String? = nil, message: String? = nil) {
        primary = MediaOutcome(path: "", platform: "", status: status)
        primary.reason = reason
        primary.message = message
    }
}

// The primary reference's fields, read and written on the outcome itself.
extension Outcome {
    public var status: OutcomeStatus {
        get { primary.status }
        set { primary.status = newValue }
    }

    /// Machine-readable cause for `rejected`, `best_attempt` and `skipped`, e.g. `http_404`.
    public var reason: String? {
        get { primary.reason }
        set { primary.reason = newValue }
    }

    /// `status` or `status/reason`: the `X-PushMedia-Outcome` header of every door (the hook,
    /// media URLs, the relays) and their lines.
    public var label: String { reason.map { "\(status.rawValue)/\($0)" } ?? status.rawValue }

    /// A sentence a person can act on: what failed, where, and which rule.
    public var message: String? {
        get { primary.message }
        set { primary.message = newValue }
    }

    /// The primary reference's `path`; nil when the payload has no media reference.
    public var mediaKey: String? {
        get { primary.path.isEmpty ? nil : primary.path }
        set { primary.path = newValue ?? "" }
    }

    public var sourceURL: String? {
        get { primary.sourceURL }
        set { primary.sourceURL = newValue }
    }

    /// libmagic's type of the source, when fetched.
    public var sourceMIME: String? {
        get { primary.sourceMIME }
        set { primary.sourceMIME = newValue }
    }

    public var sourceBytes: Int64? {
        get { primary.sourceBytes }
        set { primary.sourceBytes = newValue }
    }

    public var attachment: AttachmentInfo? {
        get { primary.attachment }
        set { primary.attachment = newValue }
    }

    public var thumbnail: AttachmentInfo? {
        get { primary.thumbnail }
        set { primary.thumbnail = newValue }
    }

    /// Whether the result came from the cache.
    public var cacheHit: Bool? {
        get { primary.cacheHit }
        set { primary.cacheHit = newValue }
    }

    /// The cached result was renewed by its origin (304 or the same bytes) without a new transcode.
    public var revalidated: Bool? {
        get { primary.revalidated }
        set { primary.revalidated = newValue }
    }
}

// Flat JSON: the primary reference's fields beside the payload's own, in this order, absent
// optionals omitted.
extension Outcome: Codable {
    enum CodingKeys: String, CodingKey {
        case status, reason, message, attachment, thumbnail, warnings, vendor, media, revalidated
        case mediaKey = "media_key"
        case sourceURL = "source_url"
        case sourceMIME = "source_mime"
        case sourceBytes = "source_bytes"
        case payloadBytes = "payload_bytes"
        case cacheHit = "cache_hit"
        case timingsMs = "timings_ms"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            status: try container.decode(OutcomeStatus.self, forKey: .status),
            reason: try container.decodeIfPresent(String.self, forKey: .reason),
            message: try container.decodeIfPresent(String.self, forKey: .message))
        mediaKey = try container.decodeIfPresent(String.self, forKey: .mediaKey)
        sourceURL = try container.decodeIfPresent(String.self, forKey: .sourceURL)
        sourceMIME = try container.decodeIfPresent(String.self, forKey: .sourceMIME)
        sourceBytes = try container.decodeIfPresent(Int64.self, forKey: .sourceBytes)
        attachment = try container.decodeIfPresent(AttachmentInfo.self, forKey: .attachment)
        thumbnail = try container.decodeIfPresent(AttachmentInfo.self, forKey: .thumbnail)
        payloadBytes = try container.decode(Int.self, forKey: .payloadBytes)
        cacheHit = try container.decodeIfPresent(Bool.self, forKey: .cacheHit)
        revalidated = try container.decodeIfPresent(Bool.self, forKey: .revalidated)
        warnings = try container.decodeIfPresent([String].self, forKey: .warnings)
        timingsMs = try container.decode(StageTimings.self, forKey: .timingsMs)
        vendor = try container.decodeIfPresent(String.self, forKey: .vendor)
        media = try container.decodeIfPresent([MediaOutcome].self, forKey: .media)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encodeIfPresent(message, forKey: .message)
        try container.encodeIfPresent(mediaKey, forKey: .mediaKey)
        try container.encodeIfPresent(sourceURL, forKey: .sourceURL)
        try container.encodeIfPresent(sourceMIME, forKey: .sourceMIME)
        try container.encodeIfPresent(sourceBytes, forKey: .sourceBytes)
        try container.encodeIfPresent(attachment, forKey: .attachment)
        try container.encodeIfPresent(thumbnail, forKey: .thumbnail)
        try container.encode(payloadBytes, forKey: .payloadBytes)
        try container.encodeIfPresent(cacheHit, forKey: .cacheHit)
        try container.encodeIfPresent(revalidated, forKey: .revalidated)
        try container.encodeIfPresent(warnings, forKey: .warnings)
        try container.encode(timingsMs, forKey: .timingsMs)
        try container.encodeIfPresent(vendor, forKey: .vendor)
        try container.encodeIfPresent(media, forKey: .media)
    }
}
