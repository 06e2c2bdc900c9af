import Foundation

/// Finds the media URL in a notification's `userInfo`, at the keys PushMedia writes it to: each
/// push vendor's own key, then the generic keys. With several references, the descriptor's
/// `items` say which one is the attachment.
public enum MediaURLLocator {
    /// A media URL and where it was found (`att.id1`, `ab.att.url`, `media_url`…; the same dotted
    /// form as the descriptor's item paths).
    public struct Candidate: Sendable, Equatable {
        public var path: String
        public var url: URL
    }

    /// The generic top-level keys, in the order PushMedia's server reads them.
    public static let genericKeys = [
        "media_url", "image_url", "imageUrl", "mediaUrl", "attachment-url", "posterImageURL",
    ]

    static let airshipKey = "com.urbanairship.media_attachment"

    /// Every place looked at, for messages.
    static let keysDescription =
        "fcm_options.image, \(airshipKey).url and .urls[].url, att and os_data.att, ab.att.url, "
        + "ct_mediaUrl, itbl.attachment-url, CIO.push.image, " + genericKeys.joined(separator: ", ")

    /// The media URL to attach: the first reference the descriptor's items mark as usable, or
    /// else the first reference found (vendors' keys first, in PushMedia's detection order).
    /// Throws `invalidURL` when the value there is not an absolute http(s) URL.
    public static func attachmentURL(in userInfo: [AnyHashable: Any], descriptor: PushMediaDescriptor?) throws(NSEError)
        -> Candidate?
    {
        let found = references(in: userInfo)
        guard let chosen = usableItems(in: userInfo, descriptor: descriptor, found: found).first ?? found.first else {
            return nil
        }
        return try candidate(chosen)
    }

    /// Every media URL to attach when the descriptor's items mark several references usable
    /// (a carousel's pages, a slider's items): at most `limit` of them, in the descriptor's
    /// order, each a candidate or why its value is not a URL. The first is `attachmentURL`'s.
    /// Empty when fewer than two are usable.
    public static func attachmentURLs(in userInfo: [AnyHashable: Any], descriptor: PushMediaDescriptor?, limit: Int)
        -> [Result<Candidate, NSEError>]
    {
        let items = usableItems(in: userInfo, descriptor: descriptor, found: references(in: userInfo))
        guard items.count > 1 else { return [] }
        return items.prefix(max(1, limit)).map { item in
            do throws(NSEError) {
                return .success(try candidate(item))
            } catch {
                return .failure(error)
            }
        }
    }

    /// The descriptor's items marked usable whose path leads to a string, in its order: at a
    /// key `references` knows, or else read at the item's path (a template's page).
    private static func usableItems(
        in userInfo: [AnyHashable: Any], descriptor: PushMediaDescriptor?, found: [(path: String, value: String)]
    ) -> [(path: String, value: String)] {
        (descriptor?.items ?? []).filter { $0.status.hasAttachment }.compactMap { item in
            let value =
                found.first { $0.path == item.path }?.value ?? UserInfoPath.value(at: item.path, in: userInfo)
                as? String
            return value.map { (item.path, $0) }
        }
    }

    private static func candidate(_ reference: (path: String, value: String)) throws(NSEError) -> Candidate {
        guard let url = httpURL(reference.value) else { throw .invalidURL(key: reference.path, value: reference.value) }
        return Candidate(path: reference.path, url: url)
    }

    /// Every string at a media key, as (path, value), in search order.
    static func references(in userInfo: [AnyHashable: Any]) -> [(path: String, value: String)] {
        var found: [(path: String, value: String)] = []
        func add(_ path: String, _ value: Any?) { if let text = value as? String { found.append((path, text)) } }
        let object = UserInfoValue.object
        let root = object(userInfo) ?? [:]
        // Firebase
        add("fcm_options.image", object(root["fcm_options"])?["image"])
        // Airship: url (string or array), urls[].url
        if let airship = object(root[airshipKey]) {
            let base = "\"\(airshipKey)\""
            if let urls = airship["url"] as? [Any] {
                for (index, url) in urls.enumerated() { add("\(base).url[\(index)]", url) }
            } else {
                add("\(base).url", airship["url"])
            }
            if let urls = airship["urls"] as? [Any] {
                for (index, entry) in urls.enumerated() { add("\(base).urls[\(index)].url", object(entry)?["url"]) }
            }
        }
        // OneSignal: att = {id: url} at the top level or under os_data; ids in sorted order.
        for (prefix, att) in [("att", object(root["att"])), ("os_data.att", object(object(root["os_data"])?["att"]))] {
            guard let att else { continue }
            for key in att.keys.sorted() { add("\(prefix).\(key)", att[key]) }
        }
        add("ab.att.url", object(object(root["ab"])?["att"])?["url"])
        add("ct_mediaUrl", root["ct_mediaUrl"])
        add("itbl.attachment-url", object(root["itbl"])?["attachment-url"])
        add("CIO.push.image", object(object(root["CIO"])?["push"])?["image"])
        for key in genericKeys { add(key, root[key]) }
        return found
    }

    /// `text` as an absolute http or https URL with a host, or nil.
    public static func httpURL(_ text: String) -> URL? {
        guard text.count <= 4096, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = url.host, !host.isEmpty
        else { return nil }
        return url
    }
}
