/// The `pushmedia` descriptor added to a rewritten payload, for the app's service extension.
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

    public init(status: OutcomeStatus, reason: String? = nil, type: String? = nil, mime: String? = nil, bytes: Int64? = nil,
                width: Int? = nil, height: Int? = nil, thumb: String? = nil) {
        self.status = status
        self.reason = reason
        self.type = type
        self.mime = mime
        self.bytes = bytes
        self.width = width
        self.height = height
        self.thumb = thumb
    }

    /// Fields dropped, in this order, when the payload would exceed APNs' limit.
    public static let optionalFields = ["thumb", "bytes", "width", "height", "mime", "reason", "type"]

    /// The descriptor as JSON, without the `dropped` fields.
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
        return .object(object)
    }
}

/// Rewrite: puts the attachment URL under the payload's own media key, sets
/// `aps.mutable-content` to 1, adds the `pushmedia` descriptor, and keeps every other key and
/// value as it was, within APNs' size limit.
public enum PayloadRewriter {
    /// APNs' limit for a (non-VoIP) payload, in bytes of JSON.
    public static let apnsLimit = 4096
    /// Top-level key of the descriptor.
    public static let descriptorKey = "pushmedia"

    public enum Media: Sendable, Equatable {
        /// Put this URL under the media key.
        case replace(with: String)
        /// Leave the media key as it is.
        case keep
        /// Remove the media key (rejected media: the phone shows the text at once).
        case remove
    }

    /// The rewritten payload and what had to be trimmed.
    public struct Rewritten: Sendable {
        public var payload: JSONObject
        public var bytes: [UInt8]
        public var droppedFields: [String]
    }

    /// Rewrites `payload`. Returns nil when even the smallest form (no descriptor) exceeds `limit`.
    public static func rewrite(_ payload: JSONObject, mediaKey: String, media: Media, descriptor: Descriptor?,
                               limit: Int = apnsLimit) -> Rewritten? {
        var base = payload
        switch media {
        case let .replace(url): base[mediaKey] = .string(url)
        case .keep: break
        case .remove: base.removeValue(forKey: mediaKey)
        }
        if case .replace = media, var aps = base["aps"]?.objectValue {
            if aps["mutable-content"]?.intValue != 1 { aps["mutable-content"] = .number("1") }
            base["aps"] = .object(aps)
        }
        guard let descriptor else {
            let bytes = JSONValue.object(base).serialized()
            return bytes.count <= limit ? Rewritten(payload: base, bytes: bytes, droppedFields: []) : nil
        }
        var dropped: [String] = []
        while true {
            var candidate = base
            candidate[descriptorKey] = descriptor.json(omitting: Set(dropped))
            let bytes = JSONValue.object(candidate).serialized()
            if bytes.count <= limit { return Rewritten(payload: candidate, bytes: bytes, droppedFields: dropped) }
            guard let next = Descriptor.optionalFields.first(where: { !dropped.contains($0) }) else { break }
            dropped.append(next)
        }
        // No room for a descriptor: an input's own `pushmedia` key would describe the wrong attachment.
        base.removeValue(forKey: descriptorKey)
        let bytes = JSONValue.object(base).serialized()
        return bytes.count <= limit ? Rewritten(payload: base, bytes: bytes, droppedFields: dropped + ["pushmedia"]) : nil
    }
}
