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
