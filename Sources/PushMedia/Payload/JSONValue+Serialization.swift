// JSON serialization: compact and pretty, numbers as spelled, the size counted before writing.

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
