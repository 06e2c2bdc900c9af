extension Outcome {
    /// The media entries to show: `media` when the pipeline listed the payload's references,
    /// else the top-level fields as one `ios` entry (none when no media reference was found).
    public var mediaEntries: [MediaOutcome] {
        if let media, !media.isEmpty { return media }
        guard mediaKey != nil || primary.sourceURL != nil || primary.attachment != nil else { return [] }
        var entry = primary
        entry.platform = "ios"
        return [entry]
    }
}

extension MediaOutcome {
    /// `image`, `audio`, `video` or nil, from a MIME type.
    static func kind(ofMIME mime: String?) -> String? {
        guard let mime else { return nil }
        for kind in ["image", "audio", "video"] where mime.lowercased().hasPrefix(kind + "/") { return kind }
        return nil
    }

    /// Whether the platform is one Android-like card stands for (`android`, `huawei`, `web`).
    public var isAndroidLike: Bool { ["android", "huawei", "web"].contains(platform.lowercased()) }
}

/// The images of a notification's multi-image template, as the report and `/preview` show them:
/// every page in payload order, and what they decode to together against the phone's limit.
public struct TemplateSummary: Sendable {
    public var name: String
    /// The template's entries (pages, big image, GIF, icon), in payload order.
    public var images: [MediaOutcome]
    /// Decoded bitmap bytes of the images made, together.
    public var decoded: Int64
    /// The notification's limit (Android's 5,000,000), if the platform has one.
    public var limit: Int64?

    /// The first template of `entries` with its images, nil when no entry is a template's.
    public init?(_ entries: [MediaOutcome]) {
        guard let first = entries.first(where: { $0.template != nil }), let template = first.template else {
            return nil
        }
        name = template.name
        images = entries.filter { $0.template?.name == template.name && $0.platform == first.platform }
        decoded = images.compactMap { $0.template?.decodedBytes }.reduce(0, +)
        limit = template.decodedLimit
    }

    /// E.g. `pt_carousel: 5 of 5 images made, 4,800,000 of 5,000,000 decoded bytes`.
    public var line: String {
        let made = images.filter { $0.status.delivered && $0.attachment != nil }.count
        var text = "\(name): \(made) of \(images.count) images made, \(Self.grouped(decoded))"
        text += limit.map { " of \(Self.grouped($0)) decoded bytes" } ?? " decoded bytes"
        return text
    }

    private static func grouped(_ value: Int64) -> String {
        var digits = Array(String(value))
        var index = digits.count - 3
        while index > 0 {
            digits.insert(",", at: index)
            index -= 3
        }
        return String(digits)
    }
}
