import PushMediaFormats

/// The formats' table, shared with the phone's library (`PushMediaNSE`): `PushMediaFormats`.
public typealias MediaFormat = PushMediaFormats.MediaFormat
public typealias MediaKind = PushMediaFormats.MediaKind

extension MediaFormat {
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
}
