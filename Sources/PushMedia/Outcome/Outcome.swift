import PushMediaFormats

/// How a payload came out; shared with the phone's library (`PushMediaFormats`).
public typealias OutcomeStatus = PushMediaFormats.OutcomeStatus

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
/// beside the payload's own (`payload_bytes`, `warnings`, `timings_ms`, `vendor`, `media`). The
/// primary reference's fields are read and written on the outcome itself (`outcome.status`,
/// `outcome.reason`, `outcome.attachment`…).
@dynamicMemberLookup
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

    /// A field of the primary reference (`status`, `reason`, `message`, `sourceURL`, `attachment`…).
    @inlinable
    public subscript<Value>(dynamicMember field: WritableKeyPath<MediaOutcome, Value>) -> Value {
        get { primary[keyPath: field] }
        set { primary[keyPath: field] = newValue }
    }

    /// The primary reference's `path`; nil when the payload has no media reference.
    public var mediaKey: String? {
        get { primary.path.isEmpty ? nil : primary.path }
        set { primary.path = newValue ?? "" }
    }

    /// `status` or `status/reason`: the `X-PushMedia-Outcome` header of every door (the hook,
    /// media URLs, the relays) and their lines.
    public var label: String { primary.reason.map { "\(primary.status.rawValue)/\($0)" } ?? primary.status.rawValue }
}

// Flat JSON: the primary reference's shared fields beside the payload's own, in key order, absent
// optionals omitted (`jsonValue` and `Codable` both read `fields`).
extension Outcome: Codable {
    static let fields: [JSONField<Outcome>] =
        (MediaOutcome.flatFields.map { field in
            JSONField(
                key: field.key, value: { field.value($0.primary) }, encode: { try field.encode($0.primary, &$1) },
                decode: { try field.decode(&$0.primary, $1) })
        } + [
            .optional("media", \.media), .optional("media_key", \.mediaKey), .required("payload_bytes", \.payloadBytes),
            .required("timings_ms", \.timingsMs), .optional("vendor", \.vendor), .optional("warnings", \.warnings),
        ]).sortedByKey()

    public init(from decoder: any Decoder) throws {
        self.init(status: .skipped)
        try Self.fields.decode(into: &self, from: decoder)
    }

    public func encode(to encoder: any Encoder) throws { try Self.fields.encode(self, to: encoder) }
}
