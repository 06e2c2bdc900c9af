import PushMediaFormats

/// One media reference of a payload and what became of it. A payload may hold several (OneSignal's
/// `att`, Airship's `urls`, an FCM message with an APNs and an Android part).
public struct MediaOutcome: Sendable, Equatable {
    /// Where the URL sits in the payload, dotted, e.g. `ab.att.url`,
    /// `message.android.notification.image`.
    public var path: String
    /// The platform profile the attachment was made for: `ios`, `android`, `huawei` or `web`.
    public var platform: String
    public var status: OutcomeStatus
    /// Machine-readable cause for `rejected`, `best_attempt` and `skipped`, e.g. `http_404`.
    public var reason: String?
    /// A sentence a person can act on: what failed, where, and which rule.
    public var message: String?
    public var sourceURL: String?
    /// libmagic's type of the source and its size, when fetched.
    public var sourceMIME: String?
    public var sourceBytes: Int64?
    public var attachment: AttachmentInfo?
    public var thumbnail: AttachmentInfo?
    /// The 192 px icon of the `web` profile.
    public var icon: AttachmentInfo?
    public var hints: ThumbnailHints?
    /// Whether the result came from the cache.
    public var cacheHit: Bool?
    /// The budget ran out while another node of the fleet made the media (nothing was made
    /// here): the same payload processed again once that node is done finds it. Not written.
    public var waitedForFleet = false
    /// For an image of a multi-image template: the template and the limits it was made within.
    public var template: TemplateInfo?
    /// The cached result was past its freshness lifetime and the origin confirmed it (a 304, or
    /// the same bytes): renewed without transcoding again.
    public var revalidated: Bool?

    public init(path: String, platform: String, status: OutcomeStatus) {
        self.path = path
        self.platform = platform
        self.status = status
    }
}

// Its JSON: `fields` in key order, absent optionals omitted (`jsonValue` and `Codable` both read them).
extension MediaOutcome: Codable {
    /// The fields an outcome also writes flat, at its top level, for its primary reference.
    static let flatFields: [JSONField<MediaOutcome>] = [
        .optional("attachment", \.attachment), .optional("cache_hit", \.cacheHit),
        .optional("message", \.message), .optional("reason", \.reason), .optional("revalidated", \.revalidated),
        .optional("source_bytes", \.sourceBytes), .optional("source_mime", \.sourceMIME),
        .optional("source_url", \.sourceURL), .required("status", \.status), .optional("thumbnail", \.thumbnail),
    ]

    static let fields: [JSONField<MediaOutcome>] =
        (flatFields + [
            .optional("hints", \.hints), .optional("icon", \.icon), .required("path", \.path),
            .required("platform", \.platform), .optional("template", \.template),
        ]).sortedByKey()

    public init(from decoder: any Decoder) throws {
        self.init(path: "", platform: "", status: .skipped)
        try Self.fields.decode(into: &self, from: decoder)
    }

    public func encode(to encoder: any Encoder) throws { try Self.fields.encode(self, to: encoder) }
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

/// A normalized rectangle (0...1 of the attachment's width and height), as
/// `UNNotificationAttachmentOptionsThumbnailClippingRectKey` takes it; shared with the phone's
/// library (`PushMediaFormats`).
public typealias ClipRect = PushMediaFormats.ClipRect

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

/// An image of a multi-image template in the outcome: which template and page, the limits it was
/// made within, and what its attachment decodes to on the phone.
public struct TemplateInfo: Codable, Sendable, Equatable {
    /// `pt_carousel`, `ab_c`, `ct_ContentSlider`.
    public var name: String
    public var page: Int?
    /// The shape it is cropped to, `3:2`; nil: kept (an animation).
    public var aspect: String?
    /// The template's byte limit for one image.
    public var maxBytes: Int64
    /// The attachment's decoded bitmap bytes on the phone (width × height × 4 × the frames the SDK
    /// extracts), when one was made.
    public var decodedBytes: Int64?
    /// The limit of the notification's decoded bitmap bytes together (Android's 5,000,000).
    public var decodedLimit: Int64?

    enum CodingKeys: String, CodingKey {
        case name, page, aspect
        case maxBytes = "max_bytes"
        case decodedBytes = "decoded_bytes"
        case decodedLimit = "decoded_limit"
    }

    public init(
        name: String, page: Int?, aspect: String?, maxBytes: Int64, decodedBytes: Int64? = nil,
        decodedLimit: Int64? = nil
    ) {
        self.name = name
        self.page = page
        self.aspect = aspect
        self.maxBytes = maxBytes
        self.decodedBytes = decodedBytes
        self.decodedLimit = decodedLimit
    }

    init(_ role: TemplateRole) {
        name = role.template
        page = role.page
        aspect = role.spec.aspectText
        maxBytes = role.spec.maxBytes
        decodedLimit = role.decodedLimit
    }
}
