/// What kind of attachment a file is.
public enum MediaKind: String, Sendable, Codable {
    case image, audio, video, unsupported
}

/// A media format PushMedia knows, with the names the phone needs: the one table of formats, read
/// by the server (`PushMedia`) and by the phone's library (`PushMediaNSE`).
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

    /// A format by its names; the ones PushMedia knows follow.
    public init(id: String, mime: String, uti: String?, fileExtension: String, kind: MediaKind, decodable: Bool) {
        self.id = id
        self.mime = mime
        self.uti = uti
        self.fileExtension = fileExtension
        self.kind = kind
        self.decodable = decodable
    }

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
    /// An MPEG-2 video stream as the phone names it; the server's sniffer calls MPEG video `mpeg`.
    public static let mpeg2 = MediaFormat(
        id: "mpeg2", mime: "video/mpeg", uti: "public.mpeg-2-video", fileExtension: "m2v", kind: .video,
        decodable: false)
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

    /// A format PushMedia does not handle, named by its MIME type.
    public static func unsupported(mime: String) -> MediaFormat {
        MediaFormat(id: "unsupported", mime: mime, uti: nil, fileExtension: "bin", kind: .unsupported, decodable: false)
    }
}
