/// The ASCII bytes of `0`–`9` and `a`–`f`, indexed by a nibble's value: the store's SHA-256 names
/// and keys, and JSON's `\u00XX` escapes.
let lowercaseHexDigits: [UInt8] = Array("0123456789abcdef".utf8)

/// The value of one hex digit (`0`–`9`, `a`–`f`, `A`–`F`), nil for any other byte.
func hexDigitValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}
