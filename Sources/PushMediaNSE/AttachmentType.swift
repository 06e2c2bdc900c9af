import Foundation
import PushMediaFormats

/// The files a notification attachment may be, by Apple's `UNNotificationAttachment` rules:
/// JPEG, PNG, GIF up to 10 MB; MP3, MPEG-4 audio, WAV, AIFF up to 5 MB; MPEG, MPEG-2, MPEG-4, AVI
/// up to 50 MB. Each type knows its UTI (the type hint), its file extension (which the phone
/// reads first) and the first bytes its files start with; its names are the server's, from the
/// one table of formats (`PushMediaFormats`).
public struct AttachmentType: Sendable, Hashable, CustomStringConvertible {
    /// What the phone shows it as: `image`, `audio` or `video`.
    public typealias Kind = MediaKind

    /// The format's row in the table the server reads too.
    let format: MediaFormat
    /// Files of this type and of these share a container and are told apart by the descriptor
    /// only (an audio-only MPEG-4 file may carry a video brand).
    let family: Family

    enum Family: Sendable, Hashable { case jpeg, png, gif, mp3, isoMedia, wav, aiff, mpeg, avi }

    /// Uniform Type Identifier, e.g. `public.jpeg`.
    public var uti: String { format.uti ?? "" }
    /// File extension without the dot, e.g. `jpg`.
    public var fileExtension: String { format.fileExtension }
    /// MIME type, e.g. `image/jpeg`.
    public var mime: String { format.mime }
    public var kind: Kind { format.kind }

    public var description: String { uti }

    /// Largest attachment of this kind, in bytes ("MB" read as 10^6: a file that fits this fits
    /// either reading of Apple's numbers).
    public var maxBytes: Int64 { Self.maxBytes(for: kind) }

    public static func maxBytes(for kind: Kind) -> Int64 { AppleAttachmentLimits.maxBytes(for: kind) }

    public static let jpeg = AttachmentType(format: .jpeg, family: .jpeg)
    public static let png = AttachmentType(format: .png, family: .png)
    public static let gif = AttachmentType(format: .gif, family: .gif)
    public static let mp3 = AttachmentType(format: .mp3, family: .mp3)
    public static let m4a = AttachmentType(format: .m4a, family: .isoMedia)
    public static let wav = AttachmentType(format: .wav, family: .wav)
    public static let aiff = AttachmentType(format: .aiff, family: .aiff)
    public static let mpeg = AttachmentType(format: .mpeg, family: .mpeg)
    public static let mpeg2 = AttachmentType(format: .mpeg2, family: .mpeg)
    public static let mp4 = AttachmentType(format: .mp4, family: .isoMedia)
    public static let avi = AttachmentType(format: .avi, family: .avi)

    /// Every type, in the order above.
    public static let all: [AttachmentType] = [.jpeg, .png, .gif, .mp3, .m4a, .wav, .aiff, .mpeg, .mpeg2, .mp4, .avi]

    /// The type whose UTI is `uti`.
    public static func withUTI(_ uti: String) -> AttachmentType? { all.first { $0.uti == uti } }

    /// How many leading bytes `sniff` looks at.
    public static let sniffLength = 12

    /// The type the leading bytes of a file show, or nil when they are none of these (HTML, WebP,
    /// HEIC, AVIF, a QuickTime movie…). MPEG-4 files are `mp4` unless their brand is an audio one.
    public static func sniff(_ head: [UInt8]) -> AttachmentType? {
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + bytes.count && Array(head[offset..<offset + bytes.count]) == bytes
        }
        func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(ascii("GIF87a")) || starts(ascii("GIF89a")) { return .gif }
        if starts(ascii("ftyp"), at: 4), head.count >= 12 {
            let brand = String(decoding: head[8..<12], as: UTF8.self)
            if ["M4A ", "M4B ", "M4P "].contains(brand) { return .m4a }
            // MPEG-4 brands only: HEIC, AVIF and QuickTime share the box structure.
            return Self.mp4Brands.contains(brand) ? .mp4 : nil
        }
        if starts(ascii("RIFF")), starts(ascii("WAVE"), at: 8) { return .wav }
        if starts(ascii("RIFF")), starts(ascii("AVI "), at: 8) { return .avi }
        if starts(ascii("FORM")), starts(ascii("AIFF"), at: 8) || starts(ascii("AIFC"), at: 8) { return .aiff }
        if starts([0x00, 0x00, 0x01, 0xBA]) { return .mpeg }
        if starts([0x00, 0x00, 0x01, 0xB3]) { return .mpeg2 }
        if starts(ascii("ID3")) { return .mp3 }
        // An MPEG audio frame header: 11 sync bits, then a layer that is not "reserved" (ADTS AAC
        // uses layer 0 and is not MP3).
        if head.count >= 2, head[0] == 0xFF, head[1] & 0xE0 == 0xE0, (head[1] >> 1) & 0x03 != 0 { return .mp3 }
        return nil
    }

    /// Major brands of MPEG-4 files (ISO base media, MP4 v1/v2, AVC, iTunes video, DASH, Flash).
    static let mp4Brands: Set<String> = [
        "isom", "iso2", "iso3", "iso4", "iso5", "iso6", "iso7", "iso8", "iso9", "mp41", "mp42",
        "avc1", "M4V ", "M4VH", "M4VP", "dash", "f4v ", "MSNV", "mmp4",
    ]

    /// Whether a file sniffed as `sniffed` may be delivered as this type.
    public func matches(_ sniffed: AttachmentType) -> Bool { family == sniffed.family }

    /// Whether a `Content-Type` header value is compatible with this type: absent, a generic
    /// binary type, or a media type of the same kind (audio and video MPEG-4 share files). A
    /// text/HTML answer (a captive portal, an error page) is not.
    public func accepts(contentType: String?) -> Bool {
        guard let contentType else { return true }
        let media =
            contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        if media.isEmpty || media == "application/octet-stream" || media == "binary/octet-stream" { return true }
        let top = media.split(separator: "/").first.map(String.init) ?? ""
        switch kind {
        case .image: return top == "image"
        case .audio, .video: return top == "audio" || top == "video" || media == "application/mp4"
        case .unsupported: return false
        }
    }
}
