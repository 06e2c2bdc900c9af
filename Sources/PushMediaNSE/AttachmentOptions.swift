import PushMediaFormats

/// The options of a `UNNotificationAttachment`, from the descriptor: type hint, thumbnail
/// clipping rectangle, hidden thumbnail, thumbnail frame or time.
public struct AttachmentOptions: Sendable, Equatable {
    /// Which picture the thumbnail shows.
    public enum ThumbnailTime: Sendable, Equatable {
        /// An animated image's frame number.
        case frame(Int)
        /// A movie's time in seconds.
        case seconds(Double)
    }

    /// The option keys. On Apple platforms the glue passes UserNotifications' constants; `names`
    /// spells them out for logs and tests.
    public struct Keys: Sendable {
        public var typeHint, clippingRect, thumbnailHidden, thumbnailTime: String

        public init(typeHint: String, clippingRect: String, thumbnailHidden: String, thumbnailTime: String) {
            self.typeHint = typeHint
            self.clippingRect = clippingRect
            self.thumbnailHidden = thumbnailHidden
            self.thumbnailTime = thumbnailTime
        }

        public static let names = Keys(
            typeHint: "UNNotificationAttachmentOptionsTypeHintKey",
            clippingRect: "UNNotificationAttachmentOptionsThumbnailClippingRectKey",
            thumbnailHidden: "UNNotificationAttachmentOptionsThumbnailHiddenKey",
            thumbnailTime: "UNNotificationAttachmentOptionsThumbnailTimeKey")
    }

    /// UTI, e.g. `public.jpeg`.
    public var typeHint: String?
    public var clip: PushMediaDescriptor.ClipRect?
    public var thumbnailHidden: Bool?
    public var thumbnailTime: ThumbnailTime?

    public init(
        typeHint: String? = nil, clip: PushMediaDescriptor.ClipRect? = nil, thumbnailHidden: Bool? = nil,
        thumbnailTime: ThumbnailTime? = nil
    ) {
        self.typeHint = typeHint
        self.clip = clip
        self.thumbnailHidden = thumbnailHidden
        self.thumbnailTime = thumbnailTime
    }

    /// The options dictionary. `rect` turns the clipping rectangle into the value the platform
    /// wants (a CGRect dictionary on Apple platforms; the plain `X`/`Y`/`Width`/`Height`
    /// dictionary by default).
    public func dictionary(keys: Keys = .names, rect: (PushMediaDescriptor.ClipRect) -> Any = { $0.dictionary })
        -> [String: Any]
    {
        var options: [String: Any] = [:]
        if let typeHint { options[keys.typeHint] = typeHint }
        if let clip { options[keys.clippingRect] = rect(clip) }
        if let thumbnailHidden { options[keys.thumbnailHidden] = thumbnailHidden }
        switch thumbnailTime {
        case let .frame(frame)?: options[keys.thumbnailTime] = frame
        case let .seconds(seconds)?: options[keys.thumbnailTime] = seconds
        case nil: break
        }
        return options
    }
}
