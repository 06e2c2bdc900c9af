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

    public init() {}
}

/// A normalized rectangle (0...1 of the attachment's width and height), as
/// `UNNotificationAttachmentOptionsThumbnailClippingRectKey` takes it.
public struct ClipRect: Codable, Sendable, Equatable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// What the phone's service extension passes as `UNNotificationAttachment` options.
public struct ThumbnailHints: Codable, Sendable, Equatable {
    /// Part of the attachment shown as the thumbnail (`…ThumbnailClippingRectKey`).
    public var clip: ClipRect?
    /// Hide the thumbnail (`…ThumbnailHiddenKey`).
    public var hidden: Bool?
    /// For an animation, the frame shown as the thumbnail (`…ThumbnailTimeKey`).
    public var frame: Int?
    /// For video, the time in seconds shown as the thumbnail (`…ThumbnailTimeKey`), when the payload gave one.
    public var time: Double?

    public init(clip: ClipRect? = nil, hidden: Bool? = nil, frame: Int? = nil, time: Double? = nil) {
        self.clip = clip
        self.hidden = hidden
        self.frame = frame
        self.time = time
    }

    public var isEmpty: Bool { clip == nil && hidden == nil && frame == nil && time == nil }
}

/// One media reference of a payload and what became of it. A payload may hold several (OneSignal's
/// `att`, Airship's `urls`, an FCM message with an APNs and an Android part).
public struct MediaOutcome: Codable, Sendable, Equatable {
    /// Where the URL sits in the payload, dotted, e.g. `ab.att.url`, `message.android.notification.image`.
    public var path: String
    /// The platform profile the attachment was made for: `ios`, `android`, `huawei` or `web`.
    public var platform: String
    public var status: OutcomeStatus
    public var reason: String?
    public var message: String?
    public var sourceURL: String?
    public var sourceMIME: String?
    public var sourceBytes: Int64?
    public var attachment: AttachmentInfo?
    public var thumbnail: AttachmentInfo?
    /// The 192 px icon of the `web` profile.
    public var icon: AttachmentInfo?
    public var hints: ThumbnailHints?
    public var cacheHit: Bool?
    /// The cached result was past its freshness lifetime and the origin confirmed it (a 304, or
    /// the same bytes): renewed without transcoding again.
    public var revalidated: Bool?

    public init(path: String, platform: String, status: OutcomeStatus) {
        self.path = path
        self.platform = platform
        self.status = status
    }

    enum CodingKeys: String, CodingKey {
        case path, platform, status, reason, message, attachment, thumbnail, icon, hints
        case sourceURL = "source_url", sourceMIME = "source_mime", sourceBytes = "source_bytes", cacheHit = "cache_hit", revalidated
    }
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
    /// The cached result was renewed by its origin (304 or the same bytes) without a new transcode.
    public var revalidated: Bool?
    public var warnings: [String]?
    public var timingsMs = StageTimings()
    /// The payload convention read and written: `generic`, `fcm`, `onesignal`, `airship`, `braze`,
    /// `clevertap`, `iterable` or `customerio`.
    public var vendor: String?
    /// Every media reference of the payload, in payload order. The top-level fields above
    /// (`media_key`, `source_url`, `attachment`, …) repeat the first one.
    public var media: [MediaOutcome]?

    public init(status: OutcomeStatus, reason: String? = nil, message: String? = nil) {
        self.status = status
        self.reason = reason
        self.message = message
    }

    enum CodingKeys: String, CodingKey {
        case status, reason, message, attachment, thumbnail, warnings, vendor, media, revalidated
        case mediaKey = "media_key", sourceURL = "source_url", sourceMIME = "source_mime", sourceBytes = "source_bytes"
        case payloadBytes = "payload_bytes", cacheHit = "cache_hit", timingsMs = "timings_ms"
    }
}
