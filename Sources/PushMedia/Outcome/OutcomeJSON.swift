// The outcome as JSON without Foundation's JSONEncoder: the HTTP hook encodes one per request,
// and the encoder's reflection-driven walk was the largest cost of a cache hit. The output is
// what `JSONEncoder` with `.sortedKeys` writes for the Codable conformances (same keys, same
// order, absent optionals omitted): `Outcome` and `MediaOutcome` list each field once, as a
// `JSONField`, and both this writer and their `Codable` conformances read that list; a test
// compares the two.

extension Outcome {
    /// The outcome as a JSON object with sorted keys, as its `Codable` form: `primary`'s fields
    /// flattened beside the payload's own.
    public var jsonValue: JSONValue { .object(JSONObject(jsonMembers)) }

    /// `jsonValue` serialized, split where the number of `timings_ms.total` goes: `head`, the
    /// total, `tail` (an answer kept ready is sent again with a new total).
    public func serializedAroundTotal() -> (head: [UInt8], tail: [UInt8]) {
        var head: [UInt8] = [0x7B]
        var tail: [UInt8] = []
        var reachedTotal = false
        func write(_ bytes: [UInt8]) {
            if reachedTotal { tail += bytes } else { head += bytes }
        }
        for (index, (key, value)) in jsonMembers.enumerated() {
            if index > 0 { write([0x2C]) }
            write(JSONValue.string(key).serialized() + [0x3A])
            guard key == "timings_ms", case let .object(timings) = value else {
                write(value.serialized())
                continue
            }
            write([0x7B])
            for (position, member) in timings.members.enumerated() {
                if position > 0 { write([0x2C]) }
                write(JSONValue.string(member.key).serialized() + [0x3A])
                if member.key == "total" { reachedTotal = true } else { write(member.value.serialized()) }
            }
            write([0x7D])
        }
        tail.append(0x7D)
        return (head, tail)
    }

    private var jsonMembers: [(String, JSONValue)] { Self.fields.members(of: self) }
}

extension AttachmentInfo: JSONWritable {
    var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = [("bytes", .number(String(bytes)))]
        members.append(optional: "height", height.map { .number(String($0)) })
        members.append(("mime", .string(mime)))
        members.append(("url", .string(url)))
        members.append(optional: "uti", uti.map(JSONValue.string))
        members.append(optional: "width", width.map { .number(String($0)) })
        return .object(JSONObject(members))
    }
}

extension TemplateInfo: JSONWritable {
    var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = []
        members.append(optional: "aspect", aspect.map(JSONValue.string))
        members.append(optional: "decoded_bytes", decodedBytes.map { .number(String($0)) })
        members.append(optional: "decoded_limit", decodedLimit.map { .number(String($0)) })
        members.append(("max_bytes", .number(String(maxBytes))))
        members.append(("name", .string(name)))
        members.append(optional: "page", page.map { .number(String($0)) })
        return .object(JSONObject(members))
    }
}

extension StageTimings: JSONWritable {
    var jsonValue: JSONValue {
        .object(
            JSONObject([
                ("fetch", .number(fetch)), ("sniff", .number(sniff)), ("store", .number(store)),
                ("total", .number(total)), ("transcode", .number(transcode)),
            ]))
    }
}

extension MediaOutcome: JSONWritable {
    var jsonValue: JSONValue { .object(JSONObject(Self.fields.members(of: self))) }
}

extension ThumbnailHints: JSONWritable {
    var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = []
        if let clip {
            let rect = JSONObject([
                ("height", .number(clip.height)), ("width", .number(clip.width)),
                ("x", .number(clip.x)), ("y", .number(clip.y)),
            ])
            members.append(("clip", .object(rect)))
        }
        members.append(optional: "frame", frame.map { .number(String($0)) })
        members.append(optional: "hidden", hidden.map(JSONValue.bool))
        members.append(optional: "time", time.map { .number($0) })
        return .object(JSONObject(members))
    }
}

extension Array where Element == (String, JSONValue) {
    fileprivate mutating func append(optional key: String, _ value: JSONValue?) {
        if let value { append((key, value)) }
    }
}

/// One member of a type's JSON, written once: its key, its value for the writer above (nil: left
/// out), and its `Codable` encoding and decoding.
struct JSONField<Root>: Sendable {
    let key: String
    let value: @Sendable (Root) -> JSONValue?
    let encode: @Sendable (Root, inout KeyedEncodingContainer<JSONFieldKey>) throws -> Void
    let decode: @Sendable (inout Root, KeyedDecodingContainer<JSONFieldKey>) throws -> Void

    /// A member always written; decoding fails without it.
    static func required<Value: JSONWritable>(_ key: String, _ path: WritableKeyPath<Root, Value> & Sendable) -> Self {
        let codingKey = JSONFieldKey(stringValue: key)
        return JSONField(
            key: key, value: { $0[keyPath: path].jsonValue },
            encode: { try $1.encode($0[keyPath: path], forKey: codingKey) },
            decode: { $0[keyPath: path] = try $1.decode(Value.self, forKey: codingKey) })
    }

    /// A member left out when nil.
    static func optional<Value: JSONWritable>(_ key: String, _ path: WritableKeyPath<Root, Value?> & Sendable) -> Self {
        let codingKey = JSONFieldKey(stringValue: key)
        return JSONField(
            key: key, value: { $0[keyPath: path]?.jsonValue },
            encode: { try $1.encodeIfPresent($0[keyPath: path], forKey: codingKey) },
            decode: { $0[keyPath: path] = try $1.decodeIfPresent(Value.self, forKey: codingKey) })
    }
}

struct JSONFieldKey: CodingKey {
    let stringValue: String
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

extension Array {
    /// In key order, as the writer and `JSONEncoder`'s `.sortedKeys` write them.
    func sortedByKey<Root>() -> Self where Element == JSONField<Root> {
        sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }

    func members<Root>(of root: Root) -> [(String, JSONValue)] where Element == JSONField<Root> {
        var members: [(String, JSONValue)] = []
        members.reserveCapacity(count)
        for field in self {
            if let value = field.value(root) { members.append((field.key, value)) }
        }
        return members
    }

    func encode<Root>(_ root: Root, to encoder: any Encoder) throws where Element == JSONField<Root> {
        var container = encoder.container(keyedBy: JSONFieldKey.self)
        for field in self { try field.encode(root, &container) }
    }

    func decode<Root>(into root: inout Root, from decoder: any Decoder) throws where Element == JSONField<Root> {
        let container = try decoder.container(keyedBy: JSONFieldKey.self)
        for field in self { try field.decode(&root, container) }
    }
}

/// A value the writer writes as it is: a field's type.
protocol JSONWritable: Codable, SendableMetatype {
    var jsonValue: JSONValue { get }
}

extension String: JSONWritable {
    var jsonValue: JSONValue { .string(self) }
}

extension Bool: JSONWritable {
    var jsonValue: JSONValue { .bool(self) }
}

extension Int: JSONWritable {
    var jsonValue: JSONValue { .number(String(self)) }
}

extension Int64: JSONWritable {
    var jsonValue: JSONValue { .number(String(self)) }
}

extension OutcomeStatus: JSONWritable {
    var jsonValue: JSONValue { .string(rawValue) }
}

extension Array: JSONWritable where Element: JSONWritable {
    var jsonValue: JSONValue { .array(map(\.jsonValue)) }
}
