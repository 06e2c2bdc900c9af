/// Apple's UNNotificationAttachment rules: which formats the phone shows, and how big they may be.
///
/// "MB" in Apple's documentation is read as 10^6 bytes, the smaller (safe) reading:
/// a file at 10,000,000 bytes fits whether Apple means 10^6 or 2^20.
public struct AttachmentPolicy: Sendable, Equatable {
    /// Largest image attachment: 10 MB.
    public var maxImageBytes: Int64 = 10_000_000
    /// Largest audio attachment: 5 MB.
    public var maxAudioBytes: Int64 = 5_000_000
    /// Largest video attachment: 50 MB.
    public var maxVideoBytes: Int64 = 50_000_000
    /// Formats the phone displays as they are.
    public var acceptedFormats: Set<MediaFormat> = [.jpeg, .png, .gif, .mp3, .m4a, .wav, .aiff, .mpeg, .mp4, .avi]

    /// The iOS profile (Apple's documented caps and formats).
    public static let ios = AttachmentPolicy()

    public init() {}

    /// Byte cap for an attachment of `kind`.
    public func maxBytes(for kind: MediaKind) -> Int64 {
        switch kind {
        case .image: maxImageBytes
        case .audio: maxAudioBytes
        case .video: maxVideoBytes
        case .unsupported: 0
        }
    }

    /// Whether the phone accepts `format` at `bytes` without changes.
    public func accepts(_ format: MediaFormat, bytes: Int64) -> Bool {
        acceptedFormats.contains(format) && bytes <= maxBytes(for: format.kind)
    }
}
