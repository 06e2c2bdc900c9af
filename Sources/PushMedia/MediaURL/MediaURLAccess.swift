import Crypto
import Foundation

/// A key and salt pair that signs media URLs, as imgproxy's: the signature is the URL-safe Base64
/// (unpadded) of HMAC-SHA256(key, salt ‖ the path after the signature). Both are given
/// hex-encoded. Never printed: `description` hides them.
public struct MediaURLKey: Sendable, Equatable, CustomStringConvertible {
    let key: [UInt8]
    let salt: [UInt8]

    /// Reads a hex key and a hex salt; nil when either is empty or not hex.
    public init?(hexKey: String, hexSalt: String) {
        guard let key = Self.hexBytes(hexKey), !key.isEmpty, let salt = Self.hexBytes(hexSalt), !salt.isEmpty else {
            return nil
        }
        self.key = key
        self.salt = salt
    }

    /// The signature of `signedPath` (from its leading `/`).
    public func sign(_ signedPath: String) -> String {
        MediaURL.base64URLEncode(mac(signedPath))
    }

    private func mac(_ signedPath: String) -> HashedAuthenticationCode<SHA256> {
        var hmac = HMAC<SHA256>(key: SymmetricKey(data: key))
        hmac.update(data: salt)
        hmac.update(data: Array(signedPath.utf8))
        return hmac.finalize()
    }

    /// Whether `signature` is this key's for `signedPath`: its text compared with the expected
    /// one in constant time (text, not decoded bytes: the last Base64 digit has spare bits, and
    /// only one spelling is the signature).
    public func verifies(_ signature: String, for signedPath: String) -> Bool {
        let expected = Array(sign(signedPath).utf8)
        var given = Array(signature.utf8)
        while given.last == UInt8(ascii: "=") { given.removeLast() }
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for index in expected.indices { difference |= expected[index] ^ given[index] }
        return difference == 0
    }

    public var description: String { "MediaURLKey(hidden)" }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = hexDigitValue(digits[index]), let low = hexDigitValue(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

/// A prefix that unsigned media URLs' sources must start with (`--url-allow-source`). It matches a
/// source with the same scheme, the same whole host and the same port, whose path starts with the
/// prefix's path: `https://cdn.shop.example/` matches neither `https://cdn.shop.example.evil.com/`
/// nor `https://cdn.shop.example:8443/` nor `https://x@cdn.shop.example/`. `*` matches any source.
public struct SourcePrefix: Sendable, Equatable, CustomStringConvertible {
    /// Nil for `*`.
    let parts: SourceParts?
    public let description: String

    /// Reads `*` or `http(s)://host[:port][/path]`; nil for anything else (a prefix without a
    /// host, with credentials, a query or a fragment).
    public init?(_ text: String) {
        description = text
        if text == "*" {
            parts = nil
            return
        }
        guard let parts = SourceParts(text), !parts.hasCredentials, !text.contains("?"), !text.contains("#") else {
            return nil
        }
        self.parts = parts
    }

    /// Whether it is `*`.
    public var matchesEverything: Bool { parts == nil }

    /// Whether `source` (already through `MediaURL`'s source checks) is under this prefix.
    public func matches(_ source: String) -> Bool {
        guard let given = SourceParts(source) else { return parts == nil }
        return matches(given)
    }

    /// Whether a source read into `given` is under this prefix.
    public func matches(_ given: SourceParts) -> Bool {
        guard let parts else { return true }
        return !given.hasCredentials && given.scheme == parts.scheme && given.host == parts.host
            && given.port == parts.port && given.path.hasPrefix(parts.path)
    }
}
