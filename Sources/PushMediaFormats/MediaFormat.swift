/// What kind of attachment a file is.
public enum MediaKind: String, Sendable, Codable {
    case image, audio, video, unsupported
}

/// A media format PushMedia recognises from the bytes, with the names the phone needs.
public struct MediaFormat: Sendable, Equatable, Hashable, Codable {
    /// Short identifier, e.g. `jpeg`.
    public let id: String
    /// Canonical MIME type served with the file.
    public let mime: String
    /// Uniform Type Identifier for `UNNotificationAttachmentOptionsTypeHintKey`.
    public let uti: String?
    /// File extension (without the dot) under which the phone recognises the type.
    public let fileExtension: String
    public let kind: MediaKind
    /// libvips can decode it with its trusted loaders (so it can be transcoded).
    public let decodable: Bool

    public static let jpeg = MediaFormat(
        id: "jpeg", mime: "image/jpeg", uti: "public.jpeg", fileExtension: "jpg", kind: .image, decodable: true)
    public static let png = MediaFormat(
        id: "png", mime: "image/png", uti: "public.png", fileExtension: "png", kind: .image, decodable: true)
    public static let gif = MediaFormat(
        id: "gif", mime: "image/gif", uti: "com.compuserve.gif", fileExtension: "gif", kind: .image, decodable: true)
    public static let webp = MediaFormat(
        id: "webp", mime: "image/webp", uti: "org.webmproject.webp", fileExtension: "webp", kind: .image,
        decodable: true)
    public static let heic = MediaFormat(
        id: "heic", mime: "image/heic", uti: "public.heic", fileExtension: "heic", kind: .image, decodable: true)
    public static let heif = MediaFormat(
        id: "heif", mime: "image/heif", uti: "public.heif", fileExtension: "heif", kind: .image, decodable: true)
    public static let avif = MediaFormat(
        id: "avif", mime: "image/avif", uti: "public.avif", fileExtension: "avif", kind: .image, decodable: true)
    public static let tiff = MediaFormat(
        id: "tiff", mime: "image/tiff", uti: "public.tiff", fileExtension: "tiff", kind: .image, decodable: true)
    /// Only ImageMagick loads BMP in libvips, and that loader is blocked as untrusted:
    /// PushMedia decodes BMP itself (see `BMPDecoder`).
    public static let bmp = MediaFormat(
        id: "bmp", mime: "image/bmp", uti: "com.microsoft.bmp", fileExtension: "bmp", kind: .image, decodable: true)
    public static let mp3 = MediaFormat(
        id: "mp3", mime: "audio/mpeg", uti: "public.mp3", fileExtension: "mp3", kind: .audio, decodable: false)
    public static let m4a = MediaFormat(
        id: "m4a", mime: "audio/mp4", uti: "public.mpeg-4-audio", fileExtension: "m4a", kind: .audio, decodable: false)
    public static let wav = MediaFormat(
        id: "wav", mime: "audio/wav", uti: "com.microsoft.waveform-audio", fileExtension: "wav", kind: .audio,
        decodable: false)
    public static let aiff = MediaFormat(
        id: "aiff", mime: "audio/aiff", uti: "public.aiff-audio", fileExtension: "aiff", kind: .audio, decodable: false)
    /// Audio iOS does not play: transcoded to AAC in M4A.
    public static let flac = MediaFormat(
        id: "flac", mime: "audio/flac", uti: "org.xiph.flac", fileExtension: "flac", kind: .audio, decodable: false)
    public static let ogg = MediaFormat(
        id: "ogg", mime: "audio/ogg", uti: "org.xiph.ogg-audio", fileExtension: "ogg", kind: .audio, decodable: false)
    public static let aac = MediaFormat(
        id: "aac", mime: "audio/aac", uti: "public.aac-audio", fileExtension: "aac", kind: .audio, decodable: false)
    public static let mpeg = MediaFormat(
        id: "mpeg", mime: "video/mpeg", uti: "public.mpeg", fileExtension: "mpg", kind: .video, decodable: false)
    public static let mp4 = MediaFormat(
        id: "mp4", mime: "video/mp4", uti: "public.mpeg-4", fileExtension: "mp4", kind: .video, decodable: false)
    public static let avi = MediaFormat(
        id: "avi", mime: "video/x-msvideo", uti: "public.avi", fileExtension: "avi", kind: .video, decodable: false)
    public static let webm = MediaFormat(
        id: "webm", mime: "video/webm", uti: "org.webmproject.webm", fileExtension: "webm", kind: .video,
        decodable: false)
    /// MPEG transport stream (broadcast, HLS segments): not an attachment type; transcoded.
    public static let mpegts = MediaFormat(
        id: "mpegts", mime: "video/mp2t", uti: "public.mpeg-2-transport-stream", fileExtension: "ts", kind: .video,
        decodable: false)
    public static let matroska = MediaFormat(
        id: "matroska", mime: "video/x-matroska", uti: "org.matroska.mkv", fileExtension: "mkv", kind: .video,
        decodable: false)
    public static let quicktime = MediaFormat(
        id: "quicktime", mime: "video/quicktime", uti: "com.apple.quicktime-movie", fileExtension: "mov", kind: .video,
        decodable: false)

    /// Formats known by libmagic's MIME answer. Anything else is `unsupported`.
    static let byMagicMIME: [String: MediaFormat] = [
        "image/jpeg": .jpeg, "image/pjpeg": .jpeg,
        "image/png": .png,
        "image/gif": .gif,
        "image/webp": .webp,
        "image/heic": .heic, "image/heic-sequence": .heic,
        "image/heif": .heif, "image/heif-sequence": .heif,
        "image/avif": .avif,
        "image/tiff": .tiff,
        "image/bmp": .bmp, "image/x-ms-bmp": .bmp,
        "audio/mpeg": .mp3, "audio/mp3": .mp3,
        "audio/x-m4a": .m4a, "audio/mp4": .m4a, "audio/m4a": .m4a,
        "audio/x-wav": .wav, "audio/wav": .wav, "audio/vnd.wave": .wav, "audio/x-wave": .wav,
        "audio/x-aiff": .aiff, "audio/aiff": .aiff,
        "audio/flac": .flac, "audio/x-flac": .flac,
        "audio/ogg": .ogg, "audio/vorbis": .ogg, "audio/opus": .ogg, "application/ogg": .ogg,
        "audio/aac": .aac, "audio/x-hx-aac-adts": .aac, "audio/x-aac": .aac,
        "video/mpeg": .mpeg, "video/mp2p": .mpeg, "video/mp2t": .mpegts,
        "video/mp4": .mp4,
        "video/x-msvideo": .avi, "video/avi": .avi,
        "video/webm": .webm,
        "video/x-matroska": .matroska,
        "video/quicktime": .quicktime,
    ]

    /// A format PushMedia does not handle, named by libmagic's MIME type.
    public static func unsupported(mime: String) -> MediaFormat {
        MediaFormat(id: "unsupported", mime: mime, uti: nil, fileExtension: "bin", kind: .unsupported, decodable: false)
    }
}
