/// Where a payload keeps its media reference.
public struct MediaReference: Sendable, Equatable {
    /// The top-level key, e.g. `media_url`.
    public var key: String
    /// The value as found (may be a non-string: that is rejected later with a clear reason).
    public var value: JSONValue
}

/// Locate: finds the media reference and checks that the phone's service extension will run.
public enum MediaLocator {
    /// Top-level keys searched in order; the first one present wins.
    public static let builtInKeys = ["media_url", "image_url", "imageUrl", "mediaUrl", "attachment-url", "posterImageURL"]

    /// The media reference of `payload`, searching `builtInKeys` then `extraKeys`.
    public static func locate(in payload: JSONObject, extraKeys: [String] = []) -> MediaReference? {
        for key in builtInKeys + extraKeys {
            if let value = payload[key] { return MediaReference(key: key, value: value) }
        }
        return nil
    }

    /// Whether `aps.alert` is present and non-empty. The service extension runs only for alerts.
    public static func hasAlert(_ payload: JSONObject) -> Bool {
        switch payload["aps"]?.objectValue?["alert"] {
        case let .string(text)?: !text.isEmpty
        case let .object(alert)?: alert.count > 0
        default: false
        }
    }
}
