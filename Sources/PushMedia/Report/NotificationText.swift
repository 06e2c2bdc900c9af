import Foundation

/// The text a phone shows for a payload: title, subtitle and body.
public struct NotificationText: Sendable, Equatable {
    public var title: String?
    public var subtitle: String?
    public var body: String?

    public init(title: String? = nil, subtitle: String? = nil, body: String? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
    }

    public var isEmpty: Bool { title == nil && subtitle == nil && body == nil }

    /// Finds the notification text in the payload shapes PushMedia knows, for one platform
    /// (`ios`, or `android`/`huawei`/`web`):
    ///
    /// - APNs: `aps.alert`, a string (the body) or `{title, subtitle, body}`;
    /// - FCM: `message.notification.{title,body}`, overridden per field by
    ///   `message.apns.payload.aps.alert` on iOS and `message.android.notification.{title,body}`
    ///   on Android (`message.webpush.notification` on the web); the legacy top-level
    ///   `notification.{title,body}` too;
    /// - Airship: `com.urbanairship.media_attachment.content.{title,subtitle,body}`, which the
    ///   service extension shows instead of the alert's fields.
    ///
    /// Each field comes from the most specific place that has it for the platform.
    public static func find(in payload: JSONObject, platform: String = "ios") -> NotificationText {
        let message = payload["message"]?.objectValue
        let apsAlert = payload["aps"]?.objectValue?["alert"]
        let fcmAPNsAlert = message?["apns"]?.objectValue?["payload"]?.objectValue?["aps"]?.objectValue?["alert"]
        let fcmCommon = message?["notification"]?.objectValue
        let legacy = payload["notification"]?.objectValue
        let airship = payload["com.urbanairship.media_attachment"]?.objectValue?["content"]?.objectValue

        // Most specific first.
        var candidates: [NotificationText] = []
        switch platform {
        case "android", "huawei":
            candidates = [
                fields(message?["android"]?.objectValue?["notification"]?.objectValue), fields(fcmCommon),
                fields(legacy),
                alert(apsAlert), alert(fcmAPNsAlert),
            ]
        case "web":
            candidates = [
                fields(message?["webpush"]?.objectValue?["notification"]?.objectValue), fields(fcmCommon),
                fields(legacy),
                alert(apsAlert), alert(fcmAPNsAlert),
            ]
        default:
            candidates = [fields(airship), alert(apsAlert), alert(fcmAPNsAlert), fields(fcmCommon), fields(legacy)]
        }
        var text = NotificationText()
        for candidate in candidates {
            text.title = text.title ?? candidate.title
            text.subtitle = text.subtitle ?? candidate.subtitle
            text.body = text.body ?? candidate.body
        }
        return text
    }

    /// `aps.alert`: a string is the body; an object has `title`, `subtitle`, `body`.
    private static func alert(_ value: JSONValue?) -> NotificationText {
        switch value {
        case let .string(body)?: NotificationText(body: nonEmpty(body))
        case let .object(object)?: fields(object)
        default: NotificationText()
        }
    }

    private static func fields(_ object: JSONObject?) -> NotificationText {
        guard let object else { return NotificationText() }
        return NotificationText(
            title: nonEmpty(object["title"]?.stringValue), subtitle: nonEmpty(object["subtitle"]?.stringValue),
            body: nonEmpty(object["body"]?.stringValue))
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return nil }
        return text
    }
}
