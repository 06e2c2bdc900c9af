import Foundation

/// A notification as a phone would show it, in HTML: an iOS lock-screen banner (with the
/// attachment's thumbnail, and the attachment large as in the expanded view) or an Android
/// notification with its big picture. Used by the server's `/preview` page.
public struct NotificationCard: Sendable {
    public enum Style: String, Sendable {
        case ios
        case android
    }

    /// The attachment a card shows.
    public struct Media: Sendable, Equatable {
        /// `src` of the element: an http(s) URL or a relative path (anything else is not shown).
        public var source: String
        public var mime: String
        public var width: Int?
        public var height: Int?
        public var bytes: Int64?
        public var hints: ThumbnailHints?

        public init(
            source: String, mime: String, width: Int? = nil, height: Int? = nil, bytes: Int64? = nil,
            hints: ThumbnailHints? = nil
        ) {
            self.source = source
            self.mime = mime
            self.width = width
            self.height = height
            self.bytes = bytes
            self.hints = hints
        }
    }

    public var style: Style
    /// The app-name line (payloads do not carry it).
    public var appName: String
    public var text: NotificationText
    public var media: Media?
    /// The platform named in the caption (`ios`, `android`, `huawei`, `web`).
    public var platform: String
    /// Said in the caption, e.g. why there is no attachment.
    public var note: String?
    /// A multi-image template's images, shown under the picture as the phone pages them.
    public var pages: [Media] = []

    public init(
        style: Style, appName: String, text: NotificationText, media: Media?, platform: String? = nil,
        note: String? = nil
    ) {
        self.style = style
        self.appName = appName
        self.text = text
        self.media = media
        self.platform = platform ?? style.rawValue
        self.note = note
    }

    /// A card for one media entry of an outcome: its attachment (when there is one) and, when
    /// there is none, a note saying why.
    public init(style: Style, appName: String, text: NotificationText, entry: MediaOutcome?) {
        var media: Media?
        var note: String?
        if let entry, let attachment = entry.attachment {
            media = Media(
                source: attachment.url, mime: attachment.mime, width: attachment.width, height: attachment.height,
                bytes: attachment.bytes, hints: entry.hints)
            if entry.status == .bestAttempt { note = "best attempt" + (entry.reason.map { " (\($0))" } ?? "") }
        } else if let entry {
            note = "no attachment: \(entry.status.rawValue)" + (entry.reason.map { " (\($0))" } ?? "")
        } else {
            note = "no media in the payload"
        }
        self.init(style: style, appName: appName, text: text, media: media, platform: entry?.platform, note: note)
    }

    /// Shows the multi-image template of `entries` (for this card's platform): every image made
    /// as a page, and their decoded bytes against the notification's limit in the caption.
    public mutating func showTemplate(of entries: [MediaOutcome]) {
        guard let summary = TemplateSummary(entries.filter { $0.platform == platform }) else { return }
        pages = summary.images.compactMap { image in
            image.attachment.map {
                Media(source: $0.url, mime: $0.mime, width: $0.width, height: $0.height, bytes: $0.bytes)
            }
        }
        note = [note, summary.line].compactMap { $0 }.joined(separator: " · ")
    }

    public func html() -> String {
        let source = media.flatMap { HTML.safeURL($0.source) }
        let kind = MediaOutcome.kind(ofMIME: media?.mime)
        var out = "<figure class=\"nc nc-\(style.rawValue)\" data-platform=\"\(HTML.escape(platform))\">\n"
        out += "<div class=\"nc-banner\">\n"
        out +=
            "<div class=\"nc-head\"><span class=\"nc-icon\" aria-hidden=\"true\"></span><span class=\"nc-app\">\(HTML.escape(appName))</span>"
        out += "<span class=\"nc-when\">now</span></div>\n"
        let textBlock = textHTML()
        switch style {
        case .ios:
            out += "<div class=\"nc-row\">\(textBlock)"
            if let source, kind == "image", media?.hints?.hidden != true {
                out += "<div class=\"nc-thumb\" title=\"thumbnail\">\(thumbnailImage(source))</div>"
            }
            out += "</div>\n</div>\n"
            if let source, let kind {
                out += "<div class=\"nc-expanded\">\(element(kind: kind, source: source))</div>\n"
            }
        case .android:
            out += textBlock + "\n"
            if let source, let kind {
                out += "<div class=\"nc-picture\">\(element(kind: kind, source: source))</div>\n"
            }
            out += "</div>\n"
        }
        let shown = pages.compactMap { page in HTML.safeURL(page.source) }
        if !shown.isEmpty {
            out += "<div class=\"nc-pages\">"
            for (index, page) in shown.enumerated() {
                out += "<img class=\"nc-page\" src=\"\(HTML.escape(page))\" alt=\"page \(index + 1)\">"
            }
            out += "</div>\n"
        }
        out += "<figcaption class=\"nc-caption\">\(HTML.escape(caption(shown: source != nil)))</figcaption>\n"
        out += "</figure>\n"
        return out
    }

    private func textHTML() -> String {
        var out = "<div class=\"nc-text\">"
        if let title = text.title { out += "<div class=\"nc-title\">\(HTML.escape(title))</div>" }
        if let subtitle = text.subtitle { out += "<div class=\"nc-subtitle\">\(HTML.escape(subtitle))</div>" }
        if let body = text.body { out += "<div class=\"nc-body\">\(HTML.escape(body))</div>" }
        if text.isEmpty { out += "<div class=\"nc-body nc-empty\">(no alert text)</div>" }
        return out + "</div>"
    }

    private func element(kind: String, source: String) -> String {
        let src = HTML.escape(source)
        switch kind {
        case "image": return "<img class=\"nc-media\" src=\"\(src)\" alt=\"attachment\">"
        case "audio": return "<audio class=\"nc-media\" controls preload=\"metadata\" src=\"\(src)\"></audio>"
        default: return "<video class=\"nc-media\" controls preload=\"metadata\" src=\"\(src)\"></video>"
        }
    }

    /// The collapsed banner's square thumbnail: the clipping rectangle scaled to fill it.
    private func thumbnailImage(_ source: String) -> String {
        var style = ""
        if let clip = media?.hints?.clip, clip.width > 0, clip.height > 0, clip.width <= 1, clip.height <= 1,
            clip.x >= 0, clip.y >= 0, clip.x < 1, clip.y < 1
        {
            let f = { (value: Double) in String(format: "%.2f", value) }
            style =
                " style=\"object-fit:fill;width:\(f(100 / clip.width))%;height:\(f(100 / clip.height))%;"
                + "left:\(f(-100 * clip.x / clip.width))%;top:\(f(-100 * clip.y / clip.height))%\""
        }
        return "<img src=\"\(HTML.escape(source))\" alt=\"thumbnail\"\(style)>"
    }

    private func caption(shown: Bool) -> String {
        var parts = [platform]
        if let media, shown {
            var description = media.mime
            if let width = media.width, let height = media.height { description += " \(width)×\(height)" }
            if let bytes = media.bytes { description += ", " + HTML.bytes(bytes) }
            parts.append(description)
            if MediaOutcome.kind(ofMIME: media.mime) == "image" || media.hints?.isEmpty == false {
                parts.append("thumbnail: " + Self.describe(media.hints))
            }
        } else if media != nil {
            parts.append("attachment URL not shown (not http/https)")
        }
        if let note { parts.append(note) }
        return parts.joined(separator: " · ")
    }

    /// The thumbnail hints as words, e.g. `clip x 0.10 y 0.00 w 0.50 h 1.00, frame 3`.
    public static func describe(_ hints: ThumbnailHints?) -> String {
        guard let hints, !hints.isEmpty else { return "whole image" }
        var parts: [String] = []
        if hints.hidden == true { parts.append("hidden") }
        if let clip = hints.clip {
            parts.append(String(format: "clip x %.2f y %.2f w %.2f h %.2f", clip.x, clip.y, clip.width, clip.height))
        }
        if let frame = hints.frame { parts.append("frame \(frame)") }
        if let time = hints.time { parts.append(String(format: "at %.1f s", time)) }
        return parts.isEmpty ? "whole image" : parts.joined(separator: ", ")
    }

    /// Styles of the cards (class names start with `nc`).
    public static let css = """
        .nc { margin: 0; width: 360px; font-family: -apple-system, "Helvetica Neue", Roboto, "Liberation Sans", Arial, sans-serif; }
        .nc-banner { border-radius: 18px; padding: 10px 12px; }
        .nc-head { display: flex; align-items: center; gap: 6px; font-size: 12px; margin-bottom: 4px; }
        .nc-icon { width: 18px; height: 18px; border-radius: 5px; background: linear-gradient(135deg, #5b8def, #7b5be8); flex: none; }
        .nc-app { text-transform: uppercase; letter-spacing: .03em; flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
        .nc-when { opacity: .7; }
        .nc-row { display: flex; gap: 10px; align-items: flex-start; }
        .nc-text { flex: 1; min-width: 0; overflow-wrap: anywhere; }
        .nc-title { font-weight: 600; }
        .nc-subtitle { font-weight: 500; }
        .nc-body { white-space: pre-wrap; }
        .nc-empty { opacity: .6; font-style: italic; }
        .nc-thumb { position: relative; width: 48px; height: 48px; border-radius: 8px; overflow: hidden; flex: none; background: #ccc; }
        .nc-thumb img { position: absolute; left: 0; top: 0; width: 100%; height: 100%; object-fit: cover; }
        .nc-media { display: block; width: 100%; max-height: 480px; object-fit: contain; }
        .nc-expanded { margin-top: 8px; border-radius: 18px; overflow: hidden; background: rgba(0,0,0,.25); }
        .nc-caption { font-size: 12px; margin-top: 6px; color: #555; overflow-wrap: anywhere; }
        .nc-ios .nc-banner { background: rgba(245,245,245,.85); color: #111; box-shadow: 0 2px 10px rgba(0,0,0,.25); }
        .nc-ios { padding: 14px; border-radius: 24px; background: linear-gradient(160deg, #2b3a67, #5d4d7a 60%, #9a6c7e); }
        .nc-ios .nc-caption { color: #eee; }
        .nc-android { padding: 14px; border-radius: 24px; background: #1f1f1f; }
        .nc-android .nc-banner { background: #2d2f31; color: #e8eaed; border-radius: 22px; padding: 12px 14px; }
        .nc-android .nc-app { text-transform: none; letter-spacing: 0; flex: none; }
        .nc-android .nc-when::before { content: "• "; }
        .nc-android .nc-icon { border-radius: 50%; background: #8ab4f8; }
        .nc-android .nc-title { font-weight: 500; }
        .nc-android .nc-picture { margin-top: 8px; border-radius: 14px; overflow: hidden; }
        .nc-android .nc-caption { color: #bbb; }
        .nc-pages { display: flex; gap: 6px; margin-top: 8px; overflow-x: auto; }
        .nc-page { height: 72px; border-radius: 8px; flex: none; }
        """
}
