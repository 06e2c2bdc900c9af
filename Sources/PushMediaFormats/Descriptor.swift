/// The facts the server and the phone's library (`PushMediaNSE`) both read from the wire: what
/// became of a media reference, the thumbnail's clipping rectangle, and Apple's attachment caps.

/// What became of a media reference (and of a payload): the descriptor's and the outcome's
/// `status`.
public enum OutcomeStatus: String, Codable, Sendable, CaseIterable {
    /// The media was transcoded into an attachment the phone accepts.
    case processed
    /// The media already complied and was re-hosted byte for byte.
    case passthrough
    /// The budget ran out: the payload carries the best result ready at that moment.
    case bestAttempt = "best_attempt"
    /// The media cannot be used (see `reason`); the text is delivered without it.
    case rejected
    /// Nothing to do: no media reference, or no alert for the service extension to run on.
    case skipped

    /// The media goes out on the store's URL: `processed` or `passthrough`.
    public var delivered: Bool { self == .processed || self == .passthrough }
    /// The media URL is worth downloading on the phone: delivered, or the budget's best attempt.
    public var hasAttachment: Bool { delivered || self == .bestAttempt }
}

/// A normalized rectangle (0...1 of the attachment's width and height), as
/// `UNNotificationAttachmentOptionsThumbnailClippingRectKey` takes it.
public struct ClipRect: Codable, Sendable, Equatable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// `X`, `Y`, `Width`, `Height`: what `CGRect(dictionaryRepresentation:)` reads, and the
    /// descriptor's `clip` is written with.
    public var dictionary: [String: Double] { ["X": x, "Y": y, "Width": width, "Height": height] }
}

/// Apple's largest `UNNotificationAttachment` of each kind, in bytes ("Supported File Types and
/// Maximum Sizes" of `UNNotificationAttachment`'s documentation).
public enum AppleAttachmentLimits {
    public static let image: Int64 = 10_000_000
    public static let audio: Int64 = 5_000_000
    public static let video: Int64 = 50_000_000

    /// The cap for `kind`; 0 for what iOS does not attach.
    public static func maxBytes(for kind: MediaKind) -> Int64 {
        switch kind {
        case .image: image
        case .audio: audio
        case .video: video
        case .unsupported: 0
        }
    }
}
