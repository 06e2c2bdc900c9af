import CPushMediaShim
import Foundation

/// The type of a file as its bytes say, from libmagic. URL extensions and Content-Type headers
/// are hints that PushMedia never trusts.
public struct SniffResult: Sendable, Equatable {
    public var format: MediaFormat
    /// libmagic's MIME answer, e.g. `image/png`.
    public var magicMIME: String
    /// libmagic's description, e.g. `PNG image data, 800 x 600, 8-bit/color RGBA`.
    public var description: String
}

public enum Sniffer {
    /// How much of the file's head libmagic reads.
    public static let headBytes = 64 * 1024

    /// Sniffs the head of the file at `path`. Blocking: call from a `BlockingExecutor`.
    public static func sniff(path: String) throws(FetchError) -> SniffResult {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .io("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: headBytes)
        var filled = 0
        while filled < headBytes {
            let n = head.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, headBytes - filled) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io("reading \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            filled += n
        }
        return sniff(head[0..<filled])
    }

    /// Sniffs a buffer.
    public static func sniff(_ bytes: ArraySlice<UInt8>) -> SniffResult {
        var out = [CChar](repeating: 0, count: 256)
        let mime = bytes.withUnsafeBytes { raw in
            pm_magic_mime(raw.baseAddress, raw.count, &out, out.count) == 0
                ? String(cBuffer: out) : "application/octet-stream"
        }
        let description = bytes.withUnsafeBytes { raw in
            pm_magic_describe(raw.baseAddress, raw.count, &out, out.count) == 0 ? String(cBuffer: out) : mime
        }
        if mime == "application/octet-stream", isTransportStream(bytes) {
            return SniffResult(
                format: .mpegts, magicMIME: MediaFormat.mpegts.mime, description: "MPEG transport stream")
        }
        let format = MediaFormat.byMagicMIME[mime.lowercased()] ?? .unsupported(mime: mime)
        return SniffResult(format: format, magicMIME: mime, description: description)
    }

    /// An MPEG transport stream, which libmagic does not name: 188-byte packets, each starting
    /// with the sync byte 0x47 (at least 5 packets in a row).
    static func isTransportStream(_ bytes: ArraySlice<UInt8>) -> Bool {
        let start = bytes.startIndex
        guard bytes.count >= 188 * 5 else { return false }
        return (0..<5).allSatisfy { bytes[start + $0 * 188] == 0x47 }
    }
}
