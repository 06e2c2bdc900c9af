// A lossless JSON model for APNs payloads: keeps object key order and the
// exact spelling of numbers, parses untrusted input without recursion, and
// serializes compactly so the byte size of the output can be measured.

/// A JSON value that keeps object key order and the exact spelling of numbers.
///
/// Equality is exact: strings and keys compare by their Unicode scalars (not by
/// Swift's canonical equivalence), numbers compare by spelling (`1.0 != 1`), and
/// objects compare member by member in order.
///
/// The parser limits nesting (`maxDepth`), but recursive operations on values
/// (serialization, `==`, deinitialization) use the call stack, so avoid building
/// values nested more than a few thousand levels deep.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The literal as written, e.g. `1.0`, `-0`, `1E+3`. The parser validates it
    /// against the RFC 8259 grammar; values built by hand are written as stored.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return JSONObject.Key.bytesEqual(a, b)
        case let (.string(a), .string(b)): return JSONObject.Key.bytesEqual(a, b)
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }
}

// MARK: - JSONObject

/// An object whose members keep their input order. Keys are unique.
///
/// Keys are compared by their exact Unicode scalars, so `"é"` (U+00E9) and
/// `"e\u{301}"` are different keys, as in RFC 8259. Equality is order-sensitive.
public struct JSONObject: Sendable, Equatable {
    /// A key hashed and compared by its UTF-8 bytes.
    struct Key: Hashable, Sendable {
        let string: String

        static func bytesEqual(_ a: String, _ b: String) -> Bool {
            let (left, right) = (a.utf8, b.utf8)
            guard left.count == right.count else { return false }
            // Over both strings' bytes at once (a native string's are contiguous), not through
            // the view's index by index.
            let same = left.withContiguousStorageIfAvailable { l in
                right.withContiguousStorageIfAvailable { r in l.elementsEqual(r) }
            }
            return (same ?? nil) ?? left.elementsEqual(right)
        }

        static func == (lhs: Key, rhs: Key) -> Bool { bytesEqual(lhs.string, rhs.string) }

        func hash(into hasher: inout Hasher) {
            let utf8 = string.utf8
            hasher.combine(utf8.count)
            let done: Void? = utf8.withContiguousStorageIfAvailable {
                hasher.combine(bytes: UnsafeRawBufferPointer($0))
            }
            if done == nil { for byte in utf8 { hasher.combine(byte) } }
        }
    }

    /// Objects with more members than this get a hash index for lookups.
    private static let indexThreshold = 12

    private var storage: [(key: String, value: JSONValue)] = []
    private var index: [Key: Int]? = nil

    /// Creates an empty object.
    public init() {}

    /// Creates an object from members in order; a later duplicate key replaces
    /// the earlier value in the earlier position.
    public init(_ members: [(String, JSONValue)]) {
        storage.reserveCapacity(members.count)
        for (key, value) in members { self[key] = value }
    }

    /// The members in order.
    public var members: [(key: String, value: JSONValue)] { storage }

    /// The keys in order.
    public var keys: [String] { storage.map(\.key) }

    /// The number of members.
    public var count: Int { storage.count }

    /// The value for `key`. Setting `nil` removes the member; setting a new key
    /// appends it at the end; setting an existing key replaces its value in place.
    public subscript(key: String) -> JSONValue? {
        get { position(ofKey: key).map { storage[$0].value } }
        set {
            guard let newValue else {
                removeValue(forKey: key)
                return
            }
            if let i = position(ofKey: key) {
                storage[i].value = newValue
            } else {
                appendNewMember(key: key, value: newValue)
            }
        }
    }

    /// Removes the member for `key`, keeping the order of the others.
    /// - Returns: The removed value, or `nil` if the key was absent.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let i = position(ofKey: key) else { return nil }
        let removed = storage.remove(at: i).value
        rebuildIndex()
        return removed
    }

    /// The position of `key` in `members`, if present.
    func position(ofKey key: String) -> Int? {
        if let index { return index[Key(string: key)] }
        return storage.firstIndex { Key.bytesEqual($0.key, key) }
    }

    /// Appends a member whose key the caller knows is absent.
    mutating func appendNewMember(key: String, value: JSONValue) {
        storage.append((key: key, value: value))
        if index != nil {
            index![Key(string: key)] = storage.count - 1
        } else if storage.count > Self.indexThreshold {
            rebuildIndex()
        }
    }

    private mutating func rebuildIndex() {
        guard storage.count > Self.indexThreshold else {
            index = nil
            return
        }
        var newIndex = [Key: Int](minimumCapacity: storage.count)
        for (i, member) in storage.enumerated() { newIndex[Key(string: member.key)] = i }
        index = newIndex
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.storage.count == rhs.storage.count else { return false }
        for (a, b) in zip(lhs.storage, rhs.storage) {
            guard Key.bytesEqual(a.key, b.key), a.value == b.value else { return false }
        }
        return true
    }
}

// MARK: - JSONParseError

/// Why and where parsing failed.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        case unexpectedEnd = "unexpected end of input"
        case unexpectedCharacter = "unexpected character"
        case invalidNumber = "invalid number"
        case invalidEscape = "invalid escape sequence"
        case invalidUTF8 = "invalid UTF-8"
        case controlCharacterInString = "unescaped control character in string"
        case duplicateKey = "duplicate key"
        case tooDeep = "nesting too deep"
        case trailingData = "unexpected data after the JSON value"
        case loneSurrogate = "unpaired UTF-16 surrogate escape"
    }

    public let reason: Reason
    /// Byte offset of the problem: the offending byte, the start of the bad
    /// number, escape, UTF-8 sequence or duplicate key (its opening quote), or
    /// the input length for `unexpectedEnd`.
    public let offset: Int
    /// 1-based line; lines are separated by LF (`\n`).
    public let line: Int
    /// 1-based column, counted in bytes.
    public let column: Int
    /// Extra context: the key (`duplicateKey`), the literal (`invalidNumber`),
    /// the byte shown escaped such as `"}"`, `"\n"` or `0xEF`
    /// (`unexpectedCharacter`, `trailingData`, `controlCharacterInString`),
    /// the escape as written (`invalidEscape`, `loneSurrogate`), the bytes in hex
    /// (`invalidUTF8`) or the limit (`tooDeep`); `nil` for `unexpectedEnd`.
    public let detail: String?

    public init(reason: Reason, offset: Int, line: Int, column: Int, detail: String? = nil) {
        self.reason = reason
        self.offset = offset
        self.line = line
        self.column = column
        self.detail = detail
    }

    /// E.g. `line 3, column 14: duplicate key "media_url"`.
    public var description: String {
        var text = "line \(line), column \(column): \(reason.rawValue)"
        if let detail {
            switch reason {
            case .duplicateKey, .invalidNumber:
                text += " " + String(decoding: JSONValue.string(detail).serialized(), as: UTF8.self)
            case .tooDeep:
                text += " (\(detail))"
            default:
                text += " " + detail
            }
        }
        return text
    }
}

// MARK: - Accessors

extension JSONValue {
    /// The string, if this is `.string`.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The object, if this is `.object`.
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The elements, if this is `.array`.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The Boolean, if this is `.bool`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The number as `Int` if it is an integer literal (`-?[0-9]+`, no fraction
    /// or exponent) within `Int` range: `"1"` → 1, `"-0"` → 0, `"1.0"`, `"1e3"` and
    /// `"12345678901234567890"` → nil.
    public var intValue: Int? {
        guard case .number(let literal) = self else { return nil }
        let utf8 = literal.utf8
        let digits = utf8.first == 0x2D ? utf8.dropFirst() : utf8[...]
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(literal)
    }
}
