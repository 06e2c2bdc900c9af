/// The ASCII bytes of `0`–`9` and `a`–`f`, indexed by a nibble's value: the store's SHA-256 names
/// and keys, and JSON's `\u00XX` escapes.
let lowercaseHexDigits: [UInt8] = Array("0123456789abcdef".utf8)
