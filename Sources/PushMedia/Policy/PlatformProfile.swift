import PushMediaFormats

/// A platform profile: which formats a platform's notification shows, how big they may be, and
/// what shape the image is made into. Every profile is one row of `profiles`; nothing else in
/// the code branches on the platform.
///
/// "MB" / "KB" in vendors' documentation are read as 10^6 / 10^3 bytes, the smaller (safe)
/// reading: a file at 10,000,000 bytes fits whether Apple means 10^6 or 2^20.
public struct PlatformProfile: Sendable, Equatable {
    /// `ios`, `android`, `huawei` or `web`.
    public var id: String
    /// Largest image attachment.
    public var maxImageBytes: Int64
    /// Largest audio attachment (0: the platform shows no audio).
    public var maxAudioBytes: Int64
    /// Largest video attachment (0: the platform shows no video).
    public var maxVideoBytes: Int64
    /// Formats the platform displays as they are (passed through byte for byte when they fit).
    public var acceptedFormats: Set<MediaFormat>
    /// Longest side of a transcoded image (at most the configured `--long-edge`); nil: `--long-edge`.
    public var longEdge: Int?
    /// Width : height the image is cropped to (2 for the 2:1 expanded image); nil keeps the shape.
    public var aspect: Double?
    /// Animated GIFs stay animated (otherwise the first frame is kept).
    public var animation: Bool
    /// A transparent image may be encoded as PNG (otherwise it is flattened on white into JPEG).
    public var alpha: Bool
    /// A JPEG thumbnail is made for the phone's service extension (iOS).
    public var thumbnail: Bool
    /// Side of a square icon made beside the image (Web Push's 192 px icon); nil: none.
    public var iconEdge: Int?
    /// Written in messages: where the numbers come from.
    public var source: String
    /// The one format every attachment is made in (a media URL's extension, `delivering(_:)`);
    /// nil lets the rules above choose.
    public var delivers: MediaFormat? = nil
    /// The template image this profile was made for (`pt_carousel.page`, `ab_c.page`), whose
    /// shape, long edge and byte limit differ from the platform's own (`Templates.plan`).
    public var variant: String? = nil

    /// Apple's `UNNotificationAttachment` rules: JPEG, GIF, PNG up to 10 MB; AIFF, WAV, MP3, M4A up
    /// to 5 MB; MPEG, MPEG-2, MPEG-4, AVI up to 50 MB.
    public static let ios = PlatformProfile(
        id: "ios", maxImageBytes: AppleAttachmentLimits.image, maxAudioBytes: AppleAttachmentLimits.audio,
        maxVideoBytes: AppleAttachmentLimits.video,
        acceptedFormats: [.jpeg, .png, .gif, .mp3, .m4a, .wav, .aiff, .mpeg, .mp4, .avi],
        longEdge: nil, aspect: nil, animation: true, alpha: true, thumbnail: true, iconEdge: nil, source: "Apple's")
    /// FCM on Android: JPEG, PNG and BMP images up to 1 MB, shown as a 2:1 expanded image
    /// (made 1440×720 at most); no audio or video.
    public static let android = PlatformProfile(
        id: "android", maxImageBytes: 1_000_000, maxAudioBytes: 0, maxVideoBytes: 0,
        acceptedFormats: [.jpeg, .png, .bmp],
        longEdge: 1440, aspect: 2, animation: false, alpha: true, thumbnail: false, iconEdge: nil,
        source: "FCM's Android")
    /// Huawei Push Kit: JPEG or PNG under 512 KB (made 1024×512 at most, 2:1); no audio or video.
    public static let huawei = PlatformProfile(
        id: "huawei", maxImageBytes: 511_999, maxAudioBytes: 0, maxVideoBytes: 0,
        acceptedFormats: [.jpeg, .png],
        longEdge: 1024, aspect: 2, animation: false, alpha: true, thumbnail: false, iconEdge: nil,
        source: "Huawei Push Kit's")
    /// Web Push: a 2:1 image (1440×720 at most, JPEG/PNG/GIF first frame) and a 192×192 icon; no
    /// audio or video. 1 MB keeps the image quick to load in a browser notification.
    public static let web = PlatformProfile(
        id: "web", maxImageBytes: 1_000_000, maxAudioBytes: 0, maxVideoBytes: 0,
        acceptedFormats: [.jpeg, .png, .gif],
        longEdge: 1440, aspect: 2, animation: false, alpha: true, thumbnail: false, iconEdge: 192, source: "Web Push")

    /// Every profile, by `--profile` name.
    public static let profiles: [String: PlatformProfile] = [
        ios.id: ios, android.id: android, huawei.id: huawei, web.id: web,
    ]

    /// A media URL's `pr:` preset: a platform profile by name, or a template image's
    /// (`Templates.presets`: `carousel`, `icon`, `story`, `slider`).
    public static func preset(named name: String) -> PlatformProfile? { profiles[name] ?? Templates.presets[name] }

    /// Every `pr:` name, for messages.
    public static var presetNames: String {
        (profiles.keys.sorted() + Templates.presets.keys.sorted()).joined(separator: ", ")
    }

    /// This profile making every attachment in `format` (what a media URL's extension asks for),
    /// or nil when the platform does not show that format. Only `format` is taken as it is; an
    /// image format makes every image into it (`.jpg`: alpha flattened on white, the first
    /// frame of an animation; `.gif`: animations kept where the profile keeps them) and a
    /// video's poster frame into it; an audio or video format takes only sources of its kind.
    public func delivering(_ format: MediaFormat) -> PlatformProfile? {
        guard acceptedFormats.contains(format), maxBytes(for: format.kind) > 0 else { return nil }
        var profile = self
        profile.delivers = format
        profile.acceptedFormats = [format]
        switch format.kind {
        case .image:
            profile.maxAudioBytes = 0
            profile.maxVideoBytes = 0
            profile.alpha = format != .jpeg
            profile.animation = animation && format == .gif
        case .audio:
            profile.maxImageBytes = 0
            profile.maxVideoBytes = 0
            profile.thumbnail = false
            profile.iconEdge = nil
        case .video:
            profile.maxImageBytes = 0
            profile.maxAudioBytes = 0
            profile.iconEdge = nil
        case .unsupported:
            return nil
        }
        return profile
    }

    /// Byte cap for an attachment of `kind`.
    public func maxBytes(for kind: MediaKind) -> Int64 {
        switch kind {
        case .image: maxImageBytes
        case .audio: maxAudioBytes
        case .video: maxVideoBytes
        case .unsupported: 0
        }
    }

    /// Whether the platform accepts `format` at `bytes` without changes.
    public func accepts(_ format: MediaFormat, bytes: Int64) -> Bool {
        acceptedFormats.contains(format) && bytes <= maxBytes(for: format.kind)
    }

    /// Whether `width`×`height` already has the profile's shape (within 1 %).
    public func hasShape(width: Int, height: Int) -> Bool {
        guard let aspect else { return true }
        guard width > 0, height > 0 else { return false }
        return abs(Double(width) / Double(height) - aspect) <= aspect * 0.01
    }
}
