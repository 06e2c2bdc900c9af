/// The `pushmedia` descriptor added to a rewritten APNs payload, for the app's service extension:
/// the wire format the phone reads (`PushMediaDescriptor` in PushMediaNSE). Written at the key
/// `PayloadRewriter.descriptorKey`, trimmed field by field (`optionalFields`) to fit APNs' limit.
public struct Descriptor: Sendable, Equatable {
    public var status: OutcomeStatus
    public var reason: String?
    /// UTI of the attachment, e.g. `public.jpeg` (for `UNNotificationAttachmentOptionsTypeHintKey`).
    public var type: String?
    public var mime: String?
    public var bytes: Int64?
    public var width: Int?
    public var height: Int?
    /// URL of the small JPEG variant.
    public var thumb: String?
    /// Thumbnail options for `UNNotificationAttachment`: clipping rectangle, hidden, frame/time.
    public var hints: ThumbnailHints?
    /// URL of the profile's icon (Web Push).
    public var icon: String?
    /// With several media references: one short entry per reference (path, status, type).
    public var items: [Item]?

    /// One media reference in a descriptor with several.
    public struct Item: Sendable, Equatable {
        public var path: String
        public var status: OutcomeStatus
        public var type: String?

        public init(path: String, status: OutcomeStatus, type: String?) {
            self.path = path
            self.status = status
            self.type = type
        }
    }

    public init(
        status: OutcomeStatus, reason: String? = nil, type: String? = nil, mime: String? = nil,
        bytes: Int64? = nil, width: Int? = nil, height: Int? = nil, thumb: String? = nil,
        hints: ThumbnailHints? = nil, icon: String? = nil
    ) {
        self.status = status
        self.reason = reason
        self.type = type
        self.mime = mime
        self.bytes = bytes
        self.width = width
        self.height = height
        self.thumb = thumb
        self.hints = hints
        self.icon = icon
    }

    /// Fields dropped, in this order, when the payload would exceed APNs' limit (fields the
    /// descriptor does not have are skipped).
    public static let optionalFields = [
        "items", "thumb", "icon", "bytes", "width", "height", "mime", "reason", "frame", "time", "clip", "hidden",
        "type",
    ]

    /// The descriptor as JSON, without the `dropped` fields. `clip` is written with the keys of a
    /// CGRect dictionary (`X`, `Y`, `Width`, `Height`), so `CGRect(dictionaryRepresentation:)`
    /// reads it as it is.
    public func json(omitting dropped: Set<String>) -> JSONValue {
        var object = JSONObject()
        object["v"] = .number("1")
        object["status"] = .string(status.rawValue)
        func add(_ key: String, _ value: JSONValue?) { if let value, !dropped.contains(key) { object[key] = value } }
        add("reason", reason.map(JSONValue.string))
        add("type", type.map(JSONValue.string))
        add("mime", mime.map(JSONValue.string))
        add("bytes", bytes.map { .number(String($0)) })
        add("width", width.map { .number(String($0)) })
        add("height", height.map { .number(String($0)) })
        add("thumb", thumb.map(JSONValue.string))
        add("icon", icon.map(JSONValue.string))
        if let clip = hints?.clip {
            add(
                "clip",
                .object(
                    JSONObject([
                        ("X", .number(clip.x)), ("Y", .number(clip.y)),
                        ("Width", .number(clip.width)), ("Height", .number(clip.height)),
                    ])))
        }
        add("hidden", hints?.hidden.map(JSONValue.bool))
        add("frame", hints?.frame.map { .number(String($0)) })
        add("time", hints?.time.map { .number($0) })
        if let items, !items.isEmpty {
            add(
                "items",
                .array(
                    items.map { item in
                        var entry = JSONObject([
                            ("path", .string(item.path)), ("status", .string(item.status.rawValue)),
                        ])
                        if let type = item.type { entry["type"] = .string(type) }
                        return .object(entry)
                    }))
        }
        return .object(object)
    }
}
