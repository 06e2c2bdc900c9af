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

// MARK: - Parsing

extension JSONValue {
    /// Parses one JSON value (RFC 8259). Leading/trailing whitespace allowed, a
    /// UTF-8 BOM is rejected as `unexpectedCharacter`.
    ///
    /// Strings must be strict UTF-8; numbers must match the RFC grammar; duplicate
    /// keys are rejected. Arrays and objects may nest at most `maxDepth` levels
    /// (`[]` is depth 1; `maxDepth <= 0` allows only scalars). The parser does not
    /// recurse, so any input is safe.
    public static func parse<Bytes: Collection>(
        _ bytes: Bytes, maxDepth: Int = 128
    ) throws(JSONParseError) -> JSONValue where Bytes.Element == UInt8 {
        let buffer: [UInt8] = (bytes as? [UInt8]) ?? Array(bytes)
        var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
        return try parser.parseDocument()
    }
}

/// An iterative JSON parser over a contiguous byte buffer.
private struct JSONParser {
    private struct Frame {
        var isObject: Bool
        var array: [JSONValue] = []
        var object = JSONObject()
        var pendingKey = ""
    }

    let bytes: [UInt8]
    let maxDepth: Int
    var pos = 0
    /// Reused buffer for strings that contain escapes.
    var scratch: [UInt8] = []

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    // ASCII codes used below.
    private static let quote: UInt8 = 0x22, backslash: UInt8 = 0x5C, slash: UInt8 = 0x2F
    private static let comma: UInt8 = 0x2C, colon: UInt8 = 0x3A, minus: UInt8 = 0x2D, plus: UInt8 = 0x2B
    private static let openBracket: UInt8 = 0x5B, closeBracket: UInt8 = 0x5D
    private static let openBrace: UInt8 = 0x7B, closeBrace: UInt8 = 0x7D
    private static let zero: UInt8 = 0x30, nine: UInt8 = 0x39, dot: UInt8 = 0x2E
    private static let lowerE: UInt8 = 0x65, upperE: UInt8 = 0x45

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if pos < bytes.count {
            throw error(.trailingData, at: pos, detail: showByte(at: pos))
        }
        return value
    }

    /// Parses a value starting at `pos` (whitespace already skipped), using an
    /// explicit stack for open arrays and objects.
    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        var stack: [Frame] = []
        nextValue: while true {
            guard pos < bytes.count else { throw error(.unexpectedEnd, at: pos) }
            var value: JSONValue
            switch bytes[pos] {
            case Self.openBracket:
                guard stack.count < maxDepth else { throw tooDeep(at: pos) }
                pos += 1
                skipWhitespace()
                if pos < bytes.count, bytes[pos] == Self.closeBracket {
                    pos += 1
                    value = .array([])
                } else {
                    stack.append(Frame(isObject: false))
                    continue nextValue
                }
            case Self.openBrace:
                guard stack.count < maxDepth else { throw tooDeep(at: pos) }
                pos += 1
                skipWhitespace()
                if pos < bytes.count, bytes[pos] == Self.closeBrace {
                    pos += 1
                    value = .object(JSONObject())
                } else {
                    var frame = Frame(isObject: true)
                    frame.pendingKey = try parseMemberKey(in: frame.object)
                    stack.append(frame)
                    continue nextValue
                }
            case Self.quote:
                value = .string(try parseString())
            case 0x74:  // t
                try expectLiteral([0x74, 0x72, 0x75, 0x65])
                value = .bool(true)
            case 0x66:  // f
                try expectLiteral([0x66, 0x61, 0x6C, 0x73, 0x65])
                value = .bool(false)
            case 0x6E:  // n
                try expectLiteral([0x6E, 0x75, 0x6C, 0x6C])
                value = .null
            case Self.minus, Self.zero...Self.nine:
                value = .number(try parseNumber())
            default:
                throw error(.unexpectedCharacter, at: pos, detail: showByte(at: pos))
            }

            // Attach the finished value to its container; close containers.
            while let top = stack.indices.last {
                if stack[top].isObject {
                    let key = stack[top].pendingKey
                    stack[top].object.appendNewMember(key: key, value: value)
                } else {
                    stack[top].array.append(value)
                }
                skipWhitespace()
                guard pos < bytes.count else { throw error(.unexpectedEnd, at: pos) }
                let byte = bytes[pos]
                if byte == Self.comma {
                    pos += 1
                    skipWhitespace()
                    if stack[top].isObject {
                        stack[top].pendingKey = try parseMemberKey(in: stack[top].object)
                    }
                    continue nextValue
                }
                if stack[top].isObject ? byte == Self.closeBrace : byte == Self.closeBracket {
                    pos += 1
                    let frame = stack.removeLast()
                    value = frame.isObject ? .object(frame.object) : .array(frame.array)
                    continue
                }
                throw error(.unexpectedCharacter, at: pos, detail: showByte(at: pos))
            }
            return value
        }
    }

    /// Parses `"key" :` and the whitespace after it, rejecting keys already in `object`.
    private mutating func parseMemberKey(in object: JSONObject) throws(JSONParseError) -> String {
        guard pos < bytes.count else { throw error(.unexpectedEnd, at: pos) }
        guard bytes[pos] == Self.quote else {
            throw error(.unexpectedCharacter, at: pos, detail: showByte(at: pos))
        }
        let keyOffset = pos
        let key = try parseString()
        if object.position(ofKey: key) != nil {
            throw error(.duplicateKey, at: keyOffset, detail: key)
        }
        skipWhitespace()
        guard pos < bytes.count else { throw error(.unexpectedEnd, at: pos) }
        guard bytes[pos] == Self.colon else {
            throw error(.unexpectedCharacter, at: pos, detail: showByte(at: pos))
        }
        pos += 1
        skipWhitespace()
        return key
    }

    private mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    private mutating func expectLiteral(_ literal: [UInt8]) throws(JSONParseError) {
        for expected in literal {
            guard pos < bytes.count else { throw error(.unexpectedEnd, at: pos) }
            guard bytes[pos] == expected else {
                throw error(.unexpectedCharacter, at: pos, detail: showByte(at: pos))
            }
            pos += 1
        }
    }

    // MARK: Numbers

    private static func isDigit(_ b: UInt8) -> Bool { b >= zero && b <= nine }

    private static func isNumberByte(_ b: UInt8) -> Bool {
        isDigit(b) || b == dot || b == lowerE || b == upperE || b == plus || b == minus
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, not followed by another
    /// number character (so `01`, `1.2.3` and `1-2` are invalid numbers).
    private mutating func parseNumber() throws(JSONParseError) -> String {
        let start = pos
        var i = pos
        let n = bytes.count
        func digits(from j: Int) -> Int {
            var j = j
            while j < n, Self.isDigit(bytes[j]) { j += 1 }
            return j
        }
        var valid = true
        if bytes[i] == Self.minus { i += 1 }
        if i < n, bytes[i] == Self.zero {
            i += 1
        } else if i < n, bytes[i] > Self.zero, bytes[i] <= Self.nine {
            i = digits(from: i)
        } else {
            valid = false
        }
        if valid, i < n, bytes[i] == Self.dot {
            let end = digits(from: i + 1)
            valid = end > i + 1
            i = end
        }
        if valid, i < n, bytes[i] == Self.lowerE || bytes[i] == Self.upperE {
            var j = i + 1
            if j < n, bytes[j] == Self.plus || bytes[j] == Self.minus { j += 1 }
            let end = digits(from: j)
            valid = end > j
            i = end
        }
        if valid, i < n, Self.isNumberByte(bytes[i]) { valid = false }
        guard valid else {
            var end = start
            while end < n, Self.isNumberByte(bytes[end]) { end += 1 }
            let literal = String(decoding: bytes[start..<end], as: UTF8.self)
            throw error(.invalidNumber, at: start, detail: literal)
        }
        pos = i
        return String(decoding: bytes[start..<i], as: UTF8.self)
    }

    // MARK: Strings

    /// Parses a string whose opening quote is at `pos`.
    private mutating func parseString() throws(JSONParseError) -> String {
        let n = bytes.count
        var i = pos + 1
        var runStart = i
        var hasEscapes = false
        scratch.removeAll(keepingCapacity: true)
        while true {
            guard i < n else { throw error(.unexpectedEnd, at: n) }
            let b = bytes[i]
            if b == Self.quote {
                pos = i + 1
                if !hasEscapes {
                    return String(decoding: bytes[runStart..<i], as: UTF8.self)
                }
                scratch.append(contentsOf: bytes[runStart..<i])
                return String(decoding: scratch, as: UTF8.self)
            } else if b == Self.backslash {
                hasEscapes = true
                scratch.append(contentsOf: bytes[runStart..<i])
                i = try decodeEscape(at: i)
                runStart = i
            } else if b < 0x20 {
                throw error(.controlCharacterInString, at: i, detail: showByte(at: i))
            } else if b < 0x80 {
                i += 1
            } else {
                i += try validateUTF8Sequence(at: i)
            }
        }
    }

    /// Decodes the escape whose backslash is at `i` into `scratch`; returns the
    /// index after it.
    private mutating func decodeEscape(at i: Int) throws(JSONParseError) -> Int {
        guard i + 1 < bytes.count else { throw error(.unexpectedEnd, at: bytes.count) }
        let simple: UInt8
        switch bytes[i + 1] {
        case Self.quote: simple = Self.quote
        case Self.backslash: simple = Self.backslash
        case Self.slash: simple = Self.slash
        case 0x62: simple = 0x08  // b
        case 0x66: simple = 0x0C  // f
        case 0x6E: simple = 0x0A  // n
        case 0x72: simple = 0x0D  // r
        case 0x74: simple = 0x09  // t
        case 0x75:  // u
            let unit = try hex4(escapeAt: i)
            var scalar = UInt32(unit)
            var end = i + 6
            if (0xDC00...0xDFFF).contains(unit) {
                throw error(.loneSurrogate, at: i, detail: showRaw(i..<i + 6))
            }
            if (0xD800...0xDBFF).contains(unit) {
                guard end + 1 < bytes.count, bytes[end] == Self.backslash, bytes[end + 1] == 0x75 else {
                    throw error(.loneSurrogate, at: i, detail: showRaw(i..<i + 6))
                }
                let low = try hex4(escapeAt: end)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw error(.loneSurrogate, at: i, detail: showRaw(i..<i + 6))
                }
                scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                end += 6
            }
            appendUTF8(scalar)
            return end
        default:
            throw error(.invalidEscape, at: i, detail: showRaw(i..<i + 2))
        }
        scratch.append(simple)
        return i + 2
    }

    /// Reads the four hex digits of the `\u` escape whose backslash is at `i`.
    private func hex4(escapeAt i: Int) throws(JSONParseError) -> UInt16 {
        var value: UInt16 = 0
        for j in (i + 2)..<(i + 6) {
            guard j < bytes.count else { throw error(.unexpectedEnd, at: bytes.count) }
            let b = bytes[j]
            let digit: UInt8
            switch b {
            case 0x30...0x39: digit = b - 0x30
            case 0x41...0x46: digit = b - 0x41 + 10
            case 0x61...0x66: digit = b - 0x61 + 10
            default: throw error(.invalidEscape, at: i, detail: showRaw(i..<j + 1))
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case ..<0x80:
            scratch.append(UInt8(scalar))
        case ..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case ..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Validates the multi-byte UTF-8 sequence starting at `i` (Unicode Table 3-7:
    /// no overlong forms, no surrogates, nothing above U+10FFFF); returns its length.
    private func validateUTF8Sequence(at i: Int) throws(JSONParseError) -> Int {
        let lead = bytes[i]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            high = 0x9F
        case 0xF0:
            length = 4
            low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            high = 0x8F
        default: throw error(.invalidUTF8, at: i, detail: showHex(i..<i + 1))
        }
        for k in 1..<length {
            guard i + k < bytes.count else { throw error(.unexpectedEnd, at: bytes.count) }
            let b = bytes[i + k]
            let ok = k == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF)
            guard ok else { throw error(.invalidUTF8, at: i, detail: showHex(i..<i + k + 1)) }
        }
        return length
    }

    // MARK: Errors

    private func tooDeep(at offset: Int) -> JSONParseError {
        error(.tooDeep, at: offset, detail: "maximum depth \(max(maxDepth, 0))")
    }

    private func error(_ reason: JSONParseError.Reason, at offset: Int, detail: String? = nil) -> JSONParseError {
        var line = 1
        var lineStart = 0
        for i in 0..<min(offset, bytes.count) where bytes[i] == 0x0A {
            line += 1
            lineStart = i + 1
        }
        return JSONParseError(
            reason: reason, offset: offset, line: line,
            column: offset - lineStart + 1, detail: detail)
    }

    /// The byte at `i` for messages: a JSON-quoted ASCII character (`"}"`,
    /// `"\n"`, `"\u0001"`), the BOM, or hex for other bytes.
    private func showByte(at i: Int) -> String {
        let b = bytes[i]
        if b < 0x80 {
            return String(decoding: JSONValue.string(String(UnicodeScalar(b))).serialized(), as: UTF8.self)
        }
        if b == 0xEF, i + 2 < bytes.count, bytes[i + 1] == 0xBB, bytes[i + 2] == 0xBF {
            return "U+FEFF (byte order mark)"
        }
        return showHex(i..<i + 1)
    }

    /// The bytes in `range` as text when printable ASCII, else as hex.
    private func showRaw(_ range: Range<Int>) -> String {
        let clamped = range.clamped(to: 0..<bytes.count)
        if bytes[clamped].allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            return String(decoding: bytes[clamped], as: UTF8.self)
        }
        return showHex(clamped)
    }

    private func showHex(_ range: Range<Int>) -> String {
        let digits: [Character] = Array("0123456789ABCDEF")
        return bytes[range.clamped(to: 0..<bytes.count)].map { b in
            "0x" + String(digits[Int(b >> 4)]) + String(digits[Int(b & 0xF)])
        }.joined(separator: " ")
    }
}

// MARK: - Serialization

extension JSONValue {
    /// Compact UTF-8 serialization (no spaces). Escapes `"` `\\` and control
    /// characters (\b \f \n \r \t, others as \u00XX lowercase hex); does NOT escape
    /// `/` or non-ASCII (written as UTF-8); numbers written exactly as stored.
    public func serialized() -> [UInt8] {
        serialized(reserving: compactByteCount)
    }

    /// `serialized()` into room for `capacity` bytes reserved up front (it grows past them as
    /// needed): saves the walk that counts them when a good guess is known.
    public func serialized(reserving capacity: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        writeCompact(into: &out)
        return out
    }

    /// Pretty serialization with 2-space indentation and `": "` separators,
    /// newline-terminated; same escaping rules.
    public func prettySerialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(compactByteCount * 2 + 1)
        writePretty(into: &out, level: 0)
        out.append(0x0A)
        return out
    }

    /// The exact byte count of `serialized()`, computed without allocating.
    public var compactByteCount: Int {
        switch self {
        case .null: return 4
        case .bool(let b): return b ? 4 : 5
        case .number(let literal): return literal.utf8.count
        case .string(let s): return Self.escapedByteCount(s)
        case .array(let items):
            var total = 2 + max(items.count - 1, 0)
            for item in items { total += item.compactByteCount }
            return total
        case .object(let object):
            var total = 2 + max(object.count - 1, 0)
            for (key, value) in object.members {
                total += Self.escapedByteCount(key) + 1 + value.compactByteCount
            }
            return total
        }
    }

    private func writeCompact(into out: inout [UInt8]) {
        switch self {
        case .array(let items):
            out.append(0x5B)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                item.writeCompact(into: &out)
            }
            out.append(0x5D)
        case .object(let object):
            out.append(0x7B)
            for (i, member) in object.members.enumerated() {
                if i > 0 { out.append(0x2C) }
                Self.writeString(member.key, into: &out)
                out.append(0x3A)
                member.value.writeCompact(into: &out)
            }
            out.append(0x7D)
        default:
            writeScalar(into: &out)
        }
    }

    private func writePretty(into out: inout [UInt8], level: Int) {
        switch self {
        case .array(let items) where !items.isEmpty:
            out.append(contentsOf: [0x5B, 0x0A])
            for (i, item) in items.enumerated() {
                Self.writeIndent(level + 1, into: &out)
                item.writePretty(into: &out, level: level + 1)
                if i < items.count - 1 { out.append(0x2C) }
                out.append(0x0A)
            }
            Self.writeIndent(level, into: &out)
            out.append(0x5D)
        case .object(let object) where object.count > 0:
            out.append(contentsOf: [0x7B, 0x0A])
            for (i, member) in object.members.enumerated() {
                Self.writeIndent(level + 1, into: &out)
                Self.writeString(member.key, into: &out)
                out.append(contentsOf: [0x3A, 0x20])
                member.value.writePretty(into: &out, level: level + 1)
                if i < object.count - 1 { out.append(0x2C) }
                out.append(0x0A)
            }
            Self.writeIndent(level, into: &out)
            out.append(0x7D)
        default:
            writeCompact(into: &out)
        }
    }

    private func writeScalar(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(true): out.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
        case .bool(false): out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        case .number(let literal): out.append(contentsOf: literal.utf8)
        case .string(let s): Self.writeString(s, into: &out)
        case .array, .object: writeCompact(into: &out)
        }
    }

    private static func writeIndent(_ level: Int, into out: inout [UInt8]) {
        out.append(contentsOf: repeatElement(0x20, count: level * 2))
    }

    /// Bytes of `s` once quoted and escaped.
    private static func escapedByteCount(_ s: String) -> Int {
        func count<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> Int {
            var total = 2
            for b in bytes {
                switch b {
                case 0x22, 0x5C, 0x08, 0x0C, 0x0A, 0x0D, 0x09: total += 2
                case ..<0x20: total += 6
                default: total += 1
                }
            }
            return total
        }
        return s.utf8.withContiguousStorageIfAvailable { count($0) } ?? count(s.utf8)
    }

    private static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        var s = s
        s.withUTF8 { utf8 in
            var runStart = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                if b >= 0x20 && b != 0x22 && b != 0x5C { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                runStart = i + 1
                switch b {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x08: out.append(contentsOf: [0x5C, 0x62])
                case 0x0C: out.append(contentsOf: [0x5C, 0x66])
                case 0x0A: out.append(contentsOf: [0x5C, 0x6E])
                case 0x0D: out.append(contentsOf: [0x5C, 0x72])
                case 0x09: out.append(contentsOf: [0x5C, 0x74])
                default:
                    out.append(contentsOf: [
                        0x5C, 0x75, 0x30, 0x30, lowercaseHexDigits[Int(b >> 4)], lowercaseHexDigits[Int(b & 0xF)],
                    ])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        out.append(0x22)
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
