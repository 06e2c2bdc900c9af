// The JSON parser: iterative, strict, with errors that say what and where.

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
            case Self.openBracket, Self.openBrace:
                let isObject = bytes[pos] == Self.openBrace
                guard stack.count < maxDepth else { throw tooDeep(at: pos) }
                pos += 1
                skipWhitespace()
                if pos < bytes.count, bytes[pos] == (isObject ? Self.closeBrace : Self.closeBracket) {
                    pos += 1
                    value = isObject ? .object(JSONObject()) : .array([])
                } else {
                    var frame = Frame(isObject: isObject)
                    if isObject { frame.pendingKey = try parseMemberKey(in: frame.object) }
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
