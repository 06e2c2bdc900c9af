import Foundation

/// Hostile media, made by code so that nothing large is committed.
public enum HostileFixtures {
    /// A PNG whose header claims `width`×`height` but that carries almost no data (a pixel bomb).
    public static func pngClaiming(width: UInt32, height: UInt32) -> [UInt8] {
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var ihdr = bigEndian(width) + bigEndian(height)
        ihdr += [8, 2, 0, 0, 0]  // 8-bit RGB
        png += chunk("IHDR", ihdr)
        png += chunk("IDAT", [0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01])
        png += chunk("IEND", [])
        return png
    }

    /// A 1×1 animated GIF with `frames` frames.
    public static func gif(frames: Int, comment: String? = nil) -> [UInt8] {
        var gif = Array("GIF89a".utf8) + [1, 0, 1, 0, 0x80, 0, 0]  // 1×1, global table of 2 colours
        gif += [0, 0, 0, 255, 255, 255]
        gif += [0x21, 0xFF, 0x0B] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0]  // loop forever
        if let comment {
            gif += [0x21, 0xFE]
            for piece in stride(from: 0, to: comment.utf8.count, by: 255) {
                let bytes = Array(comment.utf8.dropFirst(piece).prefix(255))
                gif += [UInt8(bytes.count)] + bytes
            }
            gif.append(0)
        }
        for frame in 0..<frames {
            gif += [0x21, 0xF9, 4, 0, 2, 0, 0, 0]  // 20 ms per frame
            gif += [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0]  // 1×1 image
            gif += [2, 2, frame % 2 == 0 ? 0x44 : 0x4C, 0x01, 0]  // LZW: one pixel of colour 0 or 1
        }
        gif.append(0x3B)
        return gif
    }

    /// An SVG image (refused: not decoded by the trusted loaders).
    public static let svg = Array(
        #"<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script><rect width="10" height="10"/></svg>"#
            .utf8)
    /// The start of a PDF.
    public static let pdf = Array(
        "%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n".utf8)
    /// A Photoshop header (only ImageMagick would read it).
    public static let psd: [UInt8] =
        Array("8BPS".utf8) + [0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 16, 0, 0, 0, 16, 0, 8, 0, 3]
        + [UInt8](repeating: 0, count: 64)
    /// A QuickTime movie header.
    public static let quicktime: [UInt8] =
        [0, 0, 0, 0x14] + Array("ftypqt  ".utf8) + [0, 0, 0, 0] + Array("qt  ".utf8)
        + [0, 0, 0, 8] + Array("wide".utf8) + [0, 0, 0, 8] + Array("mdat".utf8)
    /// gzip-compressed bytes, served with `Content-Encoding: gzip` (never decoded).
    public static let gzipBomb: [UInt8] =
        [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x02, 0x03] + [UInt8](repeating: 0xED, count: 4096)

    /// `bytes` padded with zeros to `size`.
    public static func padded(_ bytes: [UInt8], to size: Int) -> [UInt8] {
        bytes + [UInt8](repeating: 0, count: max(0, size - bytes.count))
    }

    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typed + bigEndian(crc32(typed))
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
