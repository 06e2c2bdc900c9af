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
}

/// A produced file as the outcome reports it.
public struct AttachmentInfo: Codable, Sendable, Equatable {
    public var url: String
    public var mime: String
    public var uti: String?
    public var bytes: Int64
    public var width: Int?
    public var height: Int?
}

/// Milliseconds spent in each stage.
public struct StageTimings: Codable, Sendable, Equatable {
    public var fetch: Double = 0
    public var sniff: Double = 0
    public var transcode: Double = 0
    public var store: Double = 0
    public var total: Double = 0
}

/// The report of one payload (`process --report`, `batch`'s `report.json`, the HTTP hook).
public struct Outcome: Codable, Sendable, Equatable {
    public var status: OutcomeStatus
    /// Machine-readable cause for `rejected`, `best_attempt` and `skipped`, e.g. `http_404`.
    public var reason: String?
    /// A sentence a person can act on: what failed, where, and which rule.
    public var message: String?
    public var mediaKey: String?
    public var sourceURL: String?
    /// libmagic's type of the source and its size, when fetched.
    public var sourceMIME: String?
    public var sourceBytes: Int64?
    public var attachment: AttachmentInfo?
    public var thumbnail: AttachmentInfo?
    /// Size of the emitted payload in bytes (compact JSON, as sent to APNs).
    public var payloadBytes: Int = 0
    /// Whether the result came from the cache.
    public var cacheHit: Bool?
    public var warnings: [String]?
    public var timingsMs = StageTimings()

    public init(status: OutcomeStatus, reason: String? = nil, message: String? = nil) {
        self.status = status
        self.reason = reason
        self.message = message
    }

    enum CodingKeys: String, CodingKey {
        case status, reason, message, attachment, thumbnail, warnings
        case mediaKey = "media_key", sourceURL = "source_url", sourceMIME = "source_mime", sourceBytes = "source_bytes"
        case payloadBytes = "payload_bytes", cacheHit = "cache_hit", timingsMs = "timings_ms"
    }
}
