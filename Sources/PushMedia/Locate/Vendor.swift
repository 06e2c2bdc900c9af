/// One media reference to process: where its URL is read and written, which platform it is
/// for, and the vendor fields that go with it.
public struct MediaSlot: Sendable, Equatable {
    /// Where the URL is read. For an FCM platform part that has no image of its own this is the
    /// message's common `notification.image`.
    public var source: JSONPath
    /// Where the attachment URL is written.
    public var target: JSONPath
    /// The platform profile the attachment is made for.
    public var platform: PlatformProfile
    /// A vendor field describing the type, filled from the sniffed bytes (never copied from the input).
    public var typeField: TypeField?
    /// What is removed when the media is rejected (in this order).
    public var removals: [JSONPath]
    /// Thumbnail options the payload already gives (Airship's `options`): kept as given.
    public var givenHints: ThumbnailHints?
    /// Where the vendor keeps thumbnail options, so a computed clipping rectangle is written in
    /// its own shape (Airship: `options.crop`).
    public var hintsPath: JSONPath?
    /// Where the vendor wants the icon URL (FCM `webpush.notification.icon`), if the profile makes one.
    public var iconTarget: JSONPath?
    /// The value found at `source`.
    public var value: JSONValue
    /// Where it sits in a multi-image template (a carousel, a push story, a slider), and the
    /// rules it is made by; nil for a single image.
    public var template: TemplateRole? = nil

    /// A vendor field that names the media type.
    public enum TypeField: Sendable, Equatable {
        /// The file extension, e.g. `jpg` (Braze `ab.att.type`).
        case fileExtension(JSONPath)
        /// `image`, `gif`, `audio` or `video` (CleverTap `ct_mediaType`).
        case mediaKind(JSONPath)

        public var path: JSONPath {
            switch self {
            case let .fileExtension(path), let .mediaKind(path): path
            }
        }

        /// The field's value for an attachment of `format`.
        public func value(for format: MediaFormat) -> String {
            switch self {
            case .fileExtension: format.fileExtension
            case .mediaKind: format == .gif ? "gif" : format.kind.rawValue
            }
        }
    }
}

/// The push vendors' payload conventions: where each keeps its media, and how it is rewritten in
/// the vendor's own shape. Detection tries `detectionOrder` and takes the first shape that has
/// media; `--vendor` forces one.
public enum Vendor: String, Sendable, CaseIterable, Codable {
    /// Top-level `media_url`, `image_url`, `imageUrl`, `mediaUrl`, `attachment-url`, `posterImageURL`
    /// (and `--media-key`s).
    case generic
    /// Firebase Cloud Messaging: an HTTP v1 message (`message.notification.image`,
    /// `message.apns.fcm_options.image`, `message.android.notification.image`,
    /// `message.webpush.notification.image`), or an APNs payload with `fcm_options.image`.
    case fcm
    /// OneSignal: `att` = {id: url, …} at the top level or under `os_data`.
    case onesignal
    /// Airship: `com.urbanairship.media_attachment` with `url` (string or array) or `urls[{url, url_id}]`.
    case airship
    /// Braze: `ab.att.url` with `ab.att.type` (the file extension).
    case braze
    /// CleverTap: `ct_mediaUrl` with `ct_mediaType` (`image`, `gif`, `audio`, `video`).
    case clevertap
    /// Iterable: `itbl.attachment-url`.
    case iterable
    /// Customer.io: `CIO.push.image`.
    case customerio

    /// Shapes tried by auto-detection, most specific first.
    public static let detectionOrder: [Vendor] = [
        .fcm, .airship, .onesignal, .braze, .clevertap, .iterable, .customerio, .generic,
    ]

    static let airshipKey = "com.urbanairship.media_attachment"

    private static let oneSignalAnchors = ["att", "os_data"]
    private static let airshipAnchors = [airshipKey]
    private static let brazeAnchors = ["ab", "ab_c"]
    private static let cleverTapAnchors = ["ct_mediaUrl", "pt_id", "pt_json", "ct_ContentSlider"]
    private static let iterableAnchors = ["itbl"]
    private static let customerIOAnchors = ["CIO"]

    /// Top-level keys of which this vendor's media needs one: a payload with none of them has no
    /// media in its shape (tested before any path is built). Nil for `generic` and `fcm`.
    private var anchorKeys: [String]? {
        switch self {
        case .generic, .fcm: nil
        case .onesignal: Self.oneSignalAnchors
        case .airship: Self.airshipAnchors
        case .braze: Self.brazeAnchors
        case .clevertap: Self.cleverTapAnchors
        case .iterable: Self.iterableAnchors
        case .customerio: Self.customerIOAnchors
        }
    }

    /// The first vendor whose shape holds media in `payload`; `generic` when none does.
    public static func detect(_ payload: JSONObject, extraKeys: [String] = []) -> Vendor {
        detected(in: payload, extraKeys: extraKeys, profile: .ios).vendor
    }

    /// The first vendor whose shape holds media in `payload`, with its media references in that
    /// shape (see `slots`); `generic` and none when no shape does.
    public static func detected(in payload: JSONObject, extraKeys: [String], profile: PlatformProfile)
        -> (vendor: Vendor, slots: [MediaSlot])
    {
        for vendor in detectionOrder {
            let slots = vendor.slots(in: payload, extraKeys: extraKeys, profile: profile)
            if !slots.isEmpty { return (vendor, slots) }
        }
        return (.generic, [])
    }

    /// Where the keys this vendor reads are, for messages.
    public var keysDescription: String {
        switch self {
        case .generic: (MediaLocator.builtInKeys).joined(separator: ", ")
        case .fcm:
            "message.notification.image, message.apns.fcm_options.image, message.android.notification.image, "
                + "message.webpush.notification.image, fcm_options.image"
        case .onesignal: "att, os_data.att"
        case .airship: "\(Self.airshipKey).url, \(Self.airshipKey).urls[].url"
        case .braze: "ab.att.url, ab_cN_i (push stories)"
        case .clevertap: "ct_mediaUrl, pt_imgN, pt_big_img, pt_gif, pt_ico, pt_json, ct_ContentSlider.items[].imageUrl"
        case .iterable: "itbl.attachment-url"
        case .customerio: "CIO.push.image"
        }
    }

    /// The FCM message object's path: `message` (HTTP v1 request body), the root (a bare message
    /// object), or nil (not an FCM message).
    static func fcmMessageRoot(_ payload: JSONObject) -> JSONPath? {
        if payload["message"]?.objectValue != nil { return JSONPath(keys: "message") }
        let parts = ["apns", "android", "webpush"].contains { payload[$0]?.objectValue != nil }
        let addressed = ["token", "topic", "condition"].contains { payload[$0] != nil }
        let content = payload["notification"]?.objectValue != nil || payload["data"]?.objectValue != nil
        if payload["aps"] == nil && (parts || (addressed && content)) {
            return JSONPath([])
        }
        return nil
    }

    /// Every media reference of `payload` in this vendor's shape, in payload order. `profile` is
    /// the platform of references whose platform the payload does not say (all but FCM's parts).
    public func slots(in payload: JSONObject, extraKeys: [String], profile: PlatformProfile) -> [MediaSlot] {
        if let anchors = anchorKeys, !anchors.contains(where: { payload[$0] != nil }) { return [] }
        func slot(
            _ path: JSONPath, platform: PlatformProfile = profile, typeField: MediaSlot.TypeField? = nil,
            removals: [JSONPath]? = nil
        ) -> MediaSlot? {
            guard let value = payload[path: path] else { return nil }
            return MediaSlot(
                source: path, target: path, platform: platform, typeField: typeField, removals: removals ?? [path],
                givenHints: nil, hintsPath: nil, iconTarget: nil, value: value)
        }
        switch self {
        case .generic:
            for keys in [MediaLocator.builtInKeys, extraKeys] {
                for key in keys where payload[key] != nil {
                    if let found = slot(JSONPath(keys: key)) { return [found] }
                }
            }
            return []
        case .fcm:
            return fcmSlots(payload, profile: profile)
        case .onesignal:
            for parent in [JSONPath(keys: "att"), JSONPath(keys: "os_data", "att")] {
                guard let att = payload[path: parent]?.objectValue, att.count > 0 else { continue }
                return att.keys.compactMap { slot(parent.appending(key: $0)) }
            }
            return []
        case .airship:
            let base = JSONPath(keys: Self.airshipKey)
            guard let media = payload[path: base]?.objectValue else { return [] }
            var found: [MediaSlot] = []
            switch media["url"] {
            case .array(let urls)?:
                found += urls.indices.compactMap { slot(base.appending(key: "url").appending(.index($0))) }
            case .some:
                found += [slot(base.appending(key: "url"))].compactMap { $0 }
            case nil: break
            }
            if let urls = media["urls"]?.arrayValue {
                for index in urls.indices {
                    let entry = base.appending(key: "urls").appending(.index(index))
                    if var item = slot(entry.appending(key: "url")) {
                        item.removals = [entry]
                        found.append(item)
                    }
                }
            }
            let options = media["options"]?.objectValue
            let given = Self.airshipHints(options)
            return found.map { item in
                var item = item
                item.givenHints = given
                item.hintsPath = base.appending(key: "options")
                return item
            }
        case .braze:
            return [
                slot(
                    JSONPath(keys: "ab", "att", "url"), typeField: .fileExtension(JSONPath(keys: "ab", "att", "type")),
                    removals: [JSONPath(keys: "ab", "att")])
            ].compactMap { $0 } + Templates.slots(in: payload, data: JSONPath([]), vendors: [.braze])
        case .clevertap:
            return [
                slot(
                    JSONPath(keys: "ct_mediaUrl"), typeField: .mediaKind(JSONPath(keys: "ct_mediaType")),
                    removals: [JSONPath(keys: "ct_mediaUrl"), JSONPath(keys: "ct_mediaType")])
            ].compactMap { $0 } + Templates.slots(in: payload, data: JSONPath([]), vendors: [.clevertap])
        case .iterable:
            return [slot(JSONPath(keys: "itbl", "attachment-url"))].compactMap { $0 }
        case .customerio:
            return [slot(JSONPath(keys: "CIO", "push", "image"))].compactMap { $0 }
        }
    }

    /// FCM: one reference per platform part present (`apns` → ios, `android` → android, or huawei
    /// when that is the profile, `webpush` → web), each taking its own image or the message's
    /// common `notification.image`, and written into its own part. A message without platform
    /// parts has its common image made for `profile`. Then the images of the multi-image
    /// templates in the message's `data` (CleverTap's and Braze's data messages).
    private func fcmSlots(_ payload: JSONObject, profile: PlatformProfile) -> [MediaSlot] {
        let templates = Self.fcmMessageRoot(payload).map {
            Templates.slots(in: payload, data: $0.appending(key: "data"), vendors: [.clevertap, .braze])
        }
        return fcmNotificationSlots(payload, profile: profile) + (templates ?? [])
    }

    private func fcmNotificationSlots(_ payload: JSONObject, profile: PlatformProfile) -> [MediaSlot] {
        if payload["aps"] != nil, Self.fcmMessageRoot(payload) == nil {
            let path = JSONPath(keys: "fcm_options", "image")
            guard let value = payload[path: path] else { return [] }
            return [
                MediaSlot(
                    source: path, target: path, platform: profile, typeField: nil, removals: [path], givenHints: nil,
                    hintsPath: nil, iconTarget: nil, value: value)
            ]
        }
        guard let root = Self.fcmMessageRoot(payload) else { return [] }
        let message = payload[path: root]?.objectValue ?? JSONObject()
        let common = root.appending(key: "notification").appending(key: "image")
        let parts: [(part: String, own: [String], platform: PlatformProfile, icon: [String]?)] = [
            ("apns", ["fcm_options", "image"], .ios, nil),
            ("android", ["notification", "image"], profile.id == "huawei" ? .huawei : .android, nil),
            ("webpush", ["notification", "image"], .web, ["notification", "icon"]),
        ]
        var found: [MediaSlot] = []
        for part in parts where message[part.part]?.objectValue != nil {
            let own = JSONPath(([part.part] + part.own).map(JSONPath.Step.key)).steps
            let target = JSONPath(root.steps + own)
            let source = payload[path: target] != nil ? target : common
            // A part whose shape cannot take the URL (e.g. `fcm_options` is not an object) is left alone.
            guard let value = payload[path: source], payload.canSet(at: target) else { continue }
            let icon = part.icon.map { JSONPath(root.steps + ([part.part] + $0).map(JSONPath.Step.key)) }
            found.append(
                MediaSlot(
                    source: source, target: target, platform: part.platform, typeField: nil,
                    removals: source == target ? [target] : [], givenHints: nil, hintsPath: nil,
                    iconTarget: icon.flatMap { payload[path: $0] == nil ? $0 : nil }, value: value))
        }
        if found.isEmpty, let value = payload[path: common] {
            found.append(
                MediaSlot(
                    source: common, target: common, platform: profile, typeField: nil, removals: [common],
                    givenHints: nil, hintsPath: nil, iconTarget: nil, value: value))
        }
        return found
    }

    /// Airship's `options` as hints: `crop` {x, y, width, height}, `time`, `hidden`.
    static func airshipHints(_ options: JSONObject?) -> ThumbnailHints? {
        guard let options else { return nil }
        var hints = ThumbnailHints()
        if let crop = options["crop"]?.objectValue,
            let x = crop["x"]?.doubleValue, let y = crop["y"]?.doubleValue,
            let width = crop["width"]?.doubleValue, let height = crop["height"]?.doubleValue
        {
            hints.clip = ClipRect(x: x, y: y, width: width, height: height)
        }
        hints.time = options["time"]?.doubleValue
        hints.hidden = options["hidden"]?.boolValue
        return hints.isEmpty ? nil : hints
    }

    /// Where the APNs `aps` dictionary is for references made for iOS: `message.apns.payload.aps`
    /// in an FCM message, the top-level `aps` otherwise.
    public func apsPath(in payload: JSONObject) -> JSONPath {
        if self == .fcm, let root = Self.fcmMessageRoot(payload) {
            return JSONPath(root.steps + [.key("apns"), .key("payload"), .key("aps")])
        }
        return JSONPath(keys: "aps")
    }

    /// The object the `pushmedia` descriptor is added to: the APNs payload.
    public func descriptorParent(in payload: JSONObject) -> JSONPath { apsPath(in: payload).parent }

    /// Whether the iOS notification has alert text, without which the service extension never
    /// runs: `aps.alert`, or in an FCM message `notification.title`/`body` too.
    public func hasAlert(_ payload: JSONObject) -> Bool {
        if let alert = payload[path: apsPath(in: payload).appending(key: "alert")], Self.nonEmpty(alert) { return true }
        if self == .fcm, let root = Self.fcmMessageRoot(payload),
            let notification = payload[path: root.appending(key: "notification")]?.objectValue
        {
            return ["title", "body"].contains { notification[$0].map(Self.nonEmpty) ?? false }
        }
        return false
    }

    private static func nonEmpty(_ value: JSONValue) -> Bool {
        switch value {
        case let .string(text): !text.isEmpty
        case let .object(object): object.count > 0
        default: false
        }
    }
}

extension JSONValue {
    /// A number as a Double (nil for other kinds).
    public var doubleValue: Double? {
        if case let .number(text) = self { return Double(text) }
        return nil
    }
}
