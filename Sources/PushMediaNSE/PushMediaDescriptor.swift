import Foundation
import PushMediaFormats

/// The `pushmedia` descriptor PushMedia adds to a payload it rewrote: what the attachment is, how
/// big, its thumbnail and the thumbnail hints. Fields the server dropped to fit APNs' 4096 bytes
/// are nil.
public struct PushMediaDescriptor: Sendable, Equatable {
    /// Key of the descriptor in the payload.
    public static let key = "pushmedia"

    /// What the server did with the media (`hasAttachment`: whether its URL is worth downloading).
    public typealias Status = OutcomeStatus

    /// A normalized rectangle (0…1) with the keys of a CGRect dictionary (`dictionary`).
    public typealias ClipRect = PushMediaFormats.ClipRect

    /// One media reference of a payload with several.
    public struct Item: Sendable, Equatable {
        /// Where it is, e.g. `att.id1`.
        public var path: String
        public var status: Status
        public var type: AttachmentType?
    }

    public var version: Int
    public var status: Status
    public var reason: String?
    /// The attachment's type; nil when the server dropped it (the file's bytes decide then).
    public var type: AttachmentType?
    /// The attachment's size in bytes.
    public var bytes: Int64?
    public var width: Int?
    public var height: Int?
    /// URL of a small JPEG of the same picture (the poster frame of a video).
    public var thumb: URL?
    public var clip: ClipRect?
    public var hidden: Bool?
    /// An animation's frame to show in the thumbnail.
    public var frame: Int?
    /// A movie's time, in seconds, to show in the thumbnail.
    public var time: Double?
    public var items: [Item]

    /// Reads the descriptor of `userInfo`: nil when there is none, an error naming the field
    /// when it is malformed.
    public static func read(from userInfo: [AnyHashable: Any]) throws(NSEError) -> PushMediaDescriptor? {
        guard let value = userInfo[key] else { return nil }
        guard let object = UserInfoValue.object(value) else {
            throw .invalidDescriptor(field: key, problem: "is not an object")
        }
        return try PushMediaDescriptor(object)
    }

    /// Reads a descriptor object (`[String: Any]` as JSONSerialization or `userInfo` give it).
    public init(_ object: [String: Any]) throws(NSEError) {
        guard let version = UserInfoValue.int(object["v"]), version >= 1 else {
            throw .invalidDescriptor(field: "v", problem: "must be a version number ≥ 1")
        }
        self.version = version
        status = try Self.status(object["status"], field: "status")
        reason = try Self.string(object["reason"], field: "reason")
        if let uti = try Self.string(object["type"], field: "type") {
            guard let type = AttachmentType.withUTI(uti) else { throw .unsupportedType(uti) }
            self.type = type
        }
        if let raw = object["bytes"] {
            guard let bytes = UserInfoValue.int64(raw), bytes > 0 else {
                throw .invalidDescriptor(field: "bytes", problem: "must be a positive whole number")
            }
            let cap = type?.maxBytes ?? AttachmentType.maxBytes(for: .video)
            guard bytes <= cap else {
                throw .invalidDescriptor(field: "bytes", problem: "\(bytes) is over the \(cap)-byte cap")
            }
            self.bytes = bytes
        }
        width = try Self.count(object["width"], field: "width")
        height = try Self.count(object["height"], field: "height")
        if let text = try Self.string(object["thumb"], field: "thumb") {
            guard let url = MediaURLLocator.httpURL(text) else {
                throw .invalidDescriptor(field: "thumb", problem: "is not an absolute http(s) URL")
            }
            thumb = url
        }
        if let raw = object["clip"] {
            clip = try Self.clip(raw)
        }
        if let raw = object["hidden"] {
            guard let hidden = UserInfoValue.bool(raw) else {
                throw .invalidDescriptor(field: "hidden", problem: "must be true or false")
            }
            self.hidden = hidden
        }
        if let raw = object["frame"] {
            guard let frame = UserInfoValue.int(raw), frame >= 0 else {
                throw .invalidDescriptor(field: "frame", problem: "must be a frame number ≥ 0")
            }
            self.frame = frame
        }
        if let raw = object["time"] {
            guard let time = UserInfoValue.double(raw), time >= 0, time.isFinite else {
                throw .invalidDescriptor(field: "time", problem: "must be a number of seconds ≥ 0")
            }
            self.time = time
        }
        items = []
        if let raw = object["items"] {
            guard let entries = raw as? [Any] else {
                throw .invalidDescriptor(field: "items", problem: "is not an array")
            }
            for (index, entry) in entries.enumerated() {
                let field = "items[\(index)]"
                guard let entry = UserInfoValue.object(entry),
                    let path = entry["path"] as? String
                else {
                    throw .invalidDescriptor(field: field, problem: "needs a path")
                }
                let status = try Self.status(entry["status"], field: field + ".status")
                let type =
                    try Self.string(entry["type"], field: field + ".type").map { uti in AttachmentType.withUTI(uti) }
                    ?? nil
                items.append(Item(path: path, status: status, type: type))
            }
        }
    }

    /// What is known of one further item of a descriptor with several: its status and type (the
    /// size, thumbnail and hints describe the first attachment only).
    init(item: Item, version: Int) {
        self.version = version
        status = item.status
        type = item.type
        items = []
    }

    /// The attachment options these hints make for the attachment itself.
    public var options: AttachmentOptions {
        AttachmentOptions(
            typeHint: type?.uti, clip: clip, thumbnailHidden: hidden,
            thumbnailTime: frame.map(AttachmentOptions.ThumbnailTime.frame)
                ?? time.map(AttachmentOptions.ThumbnailTime.seconds))
    }

    /// The options for the thumbnail JPEG when it is shown instead: the same clipping and
    /// hiding; no frame or time (it is a still).
    public var thumbnailOptions: AttachmentOptions {
        AttachmentOptions(typeHint: AttachmentType.jpeg.uti, clip: clip, thumbnailHidden: hidden, thumbnailTime: nil)
    }

    private static func string(_ value: Any?, field: String) throws(NSEError) -> String? {
        guard let value else { return nil }
        guard let text = value as? String else { throw .invalidDescriptor(field: field, problem: "is not a string") }
        return text
    }

    private static func status(_ value: Any?, field: String) throws(NSEError) -> Status {
        guard let text = value as? String else {
            throw .invalidDescriptor(field: field, problem: "is missing or not a string")
        }
        guard let status = Status(rawValue: text) else {
            throw .invalidDescriptor(
                field: field,
                problem: "\"\(text.prefix(40))\" is not processed, passthrough, best_attempt, rejected or skipped")
        }
        return status
    }

    private static func count(_ value: Any?, field: String) throws(NSEError) -> Int? {
        guard let value else { return nil }
        guard let number = UserInfoValue.int(value), number > 0 else {
            throw .invalidDescriptor(field: field, problem: "must be a positive whole number")
        }
        return number
    }

    private static func clip(_ value: Any) throws(NSEError) -> ClipRect {
        guard let object = UserInfoValue.object(value),
            let x = UserInfoValue.double(object["X"]), let y = UserInfoValue.double(object["Y"]),
            let width = UserInfoValue.double(object["Width"]), let height = UserInfoValue.double(object["Height"])
        else {
            throw .invalidDescriptor(field: "clip", problem: "needs numbers X, Y, Width and Height")
        }
        let epsilon = 1e-9
        guard x >= 0, y >= 0, width > 0, height > 0, x + width <= 1 + epsilon, y + height <= 1 + epsilon else {
            throw .invalidDescriptor(
                field: "clip",
                problem: "must lie within the unit square (X \(x), Y \(y), Width \(width), Height \(height))")
        }
        return ClipRect(x: x, y: y, width: width, height: height)
    }
}

/// Values as `userInfo` and JSONSerialization hand them over: objects as `[String: Any]` or
/// `[AnyHashable: Any]`; numbers as Int, Double or NSNumber (where a Boolean is an NSNumber
/// too, and must not pass as a number).
enum UserInfoValue {
    /// An object, with its string keys.
    static func object(_ value: Any?) -> [String: Any]? {
        if let object = value as? [String: Any] { return object }
        guard let dictionary = value as? [AnyHashable: Any] else { return nil }
        var result: [String: Any] = [:]
        for (key, value) in dictionary { if let key = key.base as? String { result[key] = value } }
        return result
    }

    static func isBoolean(_ value: Any) -> Bool {
        if type(of: value) == Bool.self { return true }
        guard let number = value as? NSNumber else { return false }
        #if canImport(ObjectiveC)
            return CFGetTypeID(number) == CFBooleanGetTypeID()
        #else
            return String(cString: number.objCType) == "c"
        #endif
    }

    static func double(_ value: Any?) -> Double? {
        guard let value, !isBoolean(value) else { return nil }
        if let number = value as? NSNumber { return number.doubleValue.isFinite ? number.doubleValue : nil }
        if let number = value as? Double { return number.isFinite ? number : nil }
        if let number = value as? Int { return Double(number) }
        return nil
    }

    static func int64(_ value: Any?) -> Int64? {
        guard let number = double(value), number == number.rounded(), abs(number) < 9e15 else { return nil }
        return Int64(number)
    }

    static func int(_ value: Any?) -> Int? { int64(value).flatMap { Int(exactly: $0) } }

    static func bool(_ value: Any?) -> Bool? {
        guard let value, isBoolean(value) else { return nil }
        if let flag = value as? Bool { return flag }
        return (value as? NSNumber)?.boolValue
    }
}
