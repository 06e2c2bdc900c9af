import NIOCore

/// A send request's target (`token`, `topic` or `condition` in `message`) found in its bytes by a
/// scan that builds no values: what a campaign's repeated message costs, instead of a parse of
/// the whole body and a serialization of the rest. Requests in other shapes (escaped keys, a
/// target that is not a string, `validate_only`, more than one target or none) are left to the
/// parser.
struct FCMTarget: Equatable {
    /// `"token":"…"` as sent: the member to put back into a rewritten message.
    var member: [UInt8]
    /// The request without the member (and one comma beside it): the campaign's key.
    var rest: ByteBuffer

    /// The target of `bytes`, or nil when the request is not one the scan takes.
    init?(scanning bytes: [UInt8]) {
        var scanner = Scanner(bytes: bytes)
        guard let found = scanner.request(), scanner.atEnd() else { return nil }
        var start = found.start
        var end = found.end
        // One comma goes with the member: the one after it, or else the one before it.
        var after = end
        scanner.position = after
        scanner.skipSpace()
        if scanner.peek == UInt8(ascii: ",") {
            after = scanner.position + 1
            end = after
        } else {
            var before = start - 1
            while before > 0, Scanner.isSpace(bytes[before]) { before -= 1 }
            if bytes[before] == UInt8(ascii: ",") { start = before }
        }
        member = Array(bytes[found.start..<found.end])
        rest = ByteBuffer()
        rest.reserveCapacity(bytes.count - (end - start))
        rest.writeBytes(bytes[..<start])
        rest.writeBytes(bytes[end...])
    }

    /// The targets of a message: exactly one is given.
    static let keys: Set<[UInt8]> = [Array("token".utf8), Array("topic".utf8), Array("condition".utf8)]

    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

        static func isSpace(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
        }

        mutating func skipSpace() {
            while position < bytes.count, Self.isSpace(bytes[position]) { position += 1 }
        }

        mutating func atEnd() -> Bool {
            skipSpace()
            return position == bytes.count
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard peek == byte else { return false }
            position += 1
            return true
        }

        /// `{"message":{…}}` (other members beside `message` allowed, `validate_only` not): the
        /// range of the message's one target member.
        mutating func request() -> (start: Int, end: Int)? {
            guard take(UInt8(ascii: "{")) else { return nil }
            var found: (start: Int, end: Int)?
            var first = true
            while true {
                if first, take(UInt8(ascii: "}")) { break }
                guard let key = plainKey(), take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                if key.elementsEqual("message".utf8) {
                    guard found == nil, let target = message() else { return nil }
                    found = target
                } else {
                    guard !key.elementsEqual("validate_only".utf8), skipValue() else { return nil }
                }
                first = false
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
            return found
        }

        /// A message object with exactly one target, a string: the range of that member.
        mutating func message() -> (start: Int, end: Int)? {
            guard take(UInt8(ascii: "{")) else { return nil }
            var found: (start: Int, end: Int)?
            var first = true
            while true {
                if first, take(UInt8(ascii: "}")) { break }
                skipSpace()
                let start = position
                guard let key = plainKey(), take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                if FCMTarget.keys.contains(Array(key)) {
                    guard found == nil, peek == UInt8(ascii: "\""), skipString() else { return nil }
                    found = (start, position)
                } else {
                    guard skipValue() else { return nil }
                }
                first = false
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
            return found
        }

        /// A key without escapes (its bytes between the quotes).
        mutating func plainKey() -> ArraySlice<UInt8>? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = position
            while position < bytes.count {
                switch bytes[position] {
                case UInt8(ascii: "\""):
                    position += 1
                    return bytes[start..<(position - 1)]
                case UInt8(ascii: "\\"), 0..<0x20: return nil
                default: position += 1
                }
            }
            return nil
        }

        /// A string, escapes included, from its opening quote.
        mutating func skipString() -> Bool {
            guard peek == UInt8(ascii: "\"") else { return false }
            position += 1
            while position < bytes.count {
                switch bytes[position] {
                case UInt8(ascii: "\""):
                    position += 1
                    return true
                case UInt8(ascii: "\\"):
                    guard position + 1 < bytes.count else { return false }
                    switch bytes[position + 1] {
                    case UInt8(ascii: "u"):
                        guard position + 6 <= bytes.count,
                            bytes[(position + 2)..<(position + 6)].allSatisfy({ Self.isHex($0) })
                        else { return false }
                        position += 6
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        position += 2
                    default: return false
                    }
                case 0..<0x20: return false
                default: position += 1
                }
            }
            return false
        }

        static func isHex(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
        }

        /// Any value: strings as strings, objects and arrays by their brackets, and the bytes of
        /// a number or literal. Only the structure is checked; the parser judges the rest.
        mutating func skipValue() -> Bool {
            skipSpace()
            guard let byte = peek else { return false }
            switch byte {
            case UInt8(ascii: "\""): return skipString()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while position < bytes.count {
                    switch bytes[position] {
                    case UInt8(ascii: "\""):
                        guard skipString() else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 {
                            position += 1
                            return true
                        }
                    default: break
                    }
                    position += 1
                }
                return false
            default:
                let start = position
                while position < bytes.count {
                    switch bytes[position] {
                    case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"): return position > start
                    case let other where Self.isSpace(other): return position > start
                    default: position += 1
                    }
                }
                return position > start
            }
        }
    }
}
