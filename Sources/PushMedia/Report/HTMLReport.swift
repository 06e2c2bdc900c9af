import Foundation

/// `report.html` of a batch: a summary, then one row per payload file with its status, reason,
/// vendor, types and sizes before → after, timings, cache hit and previews. Plain HTML with
/// inline CSS; it reads the same offline and without scripts.
///
/// Previews never load anything from the network: the "after" file is linked by a relative path
/// from the report's folder into the store, the "before" file likewise when it was a local
/// file inside the media root, and a remote source is shown as text.
public struct HTMLReport: Sendable {
    /// One payload file.
    public struct Item: Sendable {
        /// Path of the payload under the batch's input directory.
        public var file: String
        /// Path of the rewritten payload relative to the report's folder (nil when none was written).
        public var output: String?
        public var outcome: Outcome
        public var writeError: String?

        public init(file: String, output: String?, outcome: Outcome, writeError: String? = nil) {
            self.file = file
            self.output = output
            self.outcome = outcome
            self.writeError = writeError
        }
    }

    /// The numbers at the top.
    public struct Summary: Sendable {
        public var payloads: Int
        public var byStatus: [String: Int]
        public var byReason: [String: Int]
        public var cacheHits: Int
        /// Bytes of the sources and of the attachments of processed and passthrough payloads.
        public var sourceBytes: Int64
        public var attachmentBytes: Int64
        public var seconds: Double?

        public init(
            payloads: Int, byStatus: [String: Int], byReason: [String: Int], cacheHits: Int,
            sourceBytes: Int64, attachmentBytes: Int64, seconds: Double? = nil
        ) {
            self.payloads = payloads
            self.byStatus = byStatus
            self.byReason = byReason
            self.cacheHits = cacheHits
            self.sourceBytes = sourceBytes
            self.attachmentBytes = attachmentBytes
            self.seconds = seconds
        }

        /// Counted as `report.json`'s summary counts them.
        public init(outcomes: [Outcome], seconds: Double? = nil) {
            let converted = outcomes.filter(\.status.delivered)
            self.init(
                payloads: outcomes.count,
                byStatus: Dictionary(grouping: outcomes, by: { $0.status.rawValue }).mapValues(\.count),
                byReason: Dictionary(grouping: outcomes.compactMap(\.reason), by: { $0 }).mapValues(\.count),
                cacheHits: outcomes.filter { $0.cacheHit == true }.count,
                sourceBytes: converted.compactMap(\.sourceBytes).reduce(0, +),
                attachmentBytes: converted.compactMap(\.attachment?.bytes).reduce(0, +),
                seconds: seconds)
        }
    }

    public var items: [Item]
    public var summary: Summary
    /// The folder `report.html` is written to; every link is relative to it.
    public var reportDirectory: String
    /// The store's folder (`pipeline.store.directory`): "after" previews link into it. An object
    /// store has none (nil): previews then load the attachment URLs themselves.
    public var storeDirectory: String?
    /// Where the store is, shown in the header (default: `storeDirectory`).
    public var storeLocation: String?
    /// Where local media references resolve (the batch's media root); nil never links a source.
    public var mediaRoot: String?
    /// The batch's input directory, shown in the header.
    public var input: String?

    public init(
        items: [Item], summary: Summary, reportDirectory: String, storeDirectory: String?, storeLocation: String? = nil,
        mediaRoot: String?, input: String? = nil
    ) {
        self.items = items
        self.summary = summary
        self.reportDirectory = reportDirectory
        self.storeDirectory = storeDirectory
        self.storeLocation = storeLocation ?? storeDirectory
        self.mediaRoot = mediaRoot
        self.input = input
    }

    /// Source types a browser shows in `<img>`; others are linked, not embedded.
    static let browserImageTypes: Set<String> = [
        "image/jpeg", "image/png", "image/gif", "image/webp", "image/avif", "image/bmp",
    ]

    public func render() -> String {
        var body = header()
        body += """
            <table class="items">
            <thead><tr><th>File</th><th>Status</th><th>Reason / message</th><th>Vendor</th><th>Media</th>\
            <th>Type and size, before → after</th><th>After (px)</th><th>Cache</th><th>Before</th><th>After</th><th>Timings (ms)</th></tr></thead>
            <tbody>

            """
        for item in items { body += rows(item) }
        body += "</tbody>\n</table>\n"
        if items.isEmpty { body += "<p class=\"empty\">No payload files were found.</p>\n" }
        return HTML.page(
            title: "PushMedia batch report", css: Self.css,
            policy: HTML.contentSecurityPolicy(mediaSources: ["'self'", "file:"] + remoteMediaOrigins),
            bodyAttributes: " data-payloads=\"\(items.count)\"", body: body)
    }

    /// With an object store, previews load from the attachment URLs' origins.
    private var remoteMediaOrigins: [String] {
        guard storeDirectory == nil else { return [] }
        let urls = items.flatMap { item in
            [item.outcome.attachment?.url, item.outcome.thumbnail?.url]
                + (item.outcome.media ?? []).map { $0.attachment?.url }
        }
        return Array(Set(urls.compactMap { $0.flatMap(HTML.origin(of:)) })).sorted()
    }

    // MARK: Parts

    private func header() -> String {
        var out = "<header>\n<h1>PushMedia batch report</h1>\n<p class=\"meta\">"
        var meta = ["\(summary.payloads) payload\(summary.payloads == 1 ? "" : "s")"]
        if let seconds = summary.seconds { meta.append(String(format: "%.2f s", seconds)) }
        meta.append("PushMedia \(PushMediaVersion.string)")
        if let input { meta.append("input " + input) }
        if let storeLocation { meta.append("store " + storeLocation) }
        out += meta.map(HTML.escape).joined(separator: " · ") + "</p>\n<ul class=\"counts\">"
        for status in OutcomeStatus.allCases {
            let count = summary.byStatus[status.rawValue] ?? 0
            out +=
                "<li class=\"status-\(status.rawValue)\" data-status=\"\(status.rawValue)\" data-count=\"\(count)\"><b>\(count)</b> \(status.rawValue)</li>"
        }
        out += "</ul>\n"
        let saved = summary.sourceBytes - summary.attachmentBytes
        out +=
            "<p class=\"bytes\">Media of processed and passthrough payloads: <b>\(HTML.bytes(summary.sourceBytes))</b> in → "
        out +=
            "<b>\(HTML.bytes(summary.attachmentBytes))</b> out (saved \(HTML.bytes(saved))) · cache hits \(summary.cacheHits)</p>\n"
        if !summary.byReason.isEmpty {
            let reasons = summary.byReason.sorted { $0.key < $1.key }.map { "\(HTML.escape($0.key)) \($0.value)" }
                .joined(separator: ", ")
            out += "<p class=\"reasons\">Reasons: \(reasons)</p>\n"
        }
        out +=
            "<p class=\"note\">Previews show the stored attachment (\"after\") and, for local files, the source (\"before\"), "
        out += "both read from disk; remote sources are shown as their URL, never loaded.</p>\n</header>\n"
        return out
    }

    private func rows(_ item: Item) -> String {
        let outcome = item.outcome
        let entries = outcome.mediaEntries
        var out =
            "<tr class=\"item\" data-file=\"\(HTML.escape(item.file))\" data-status=\"\(outcome.status.rawValue)\">"
        if let output = item.output {
            let link = output.split(separator: "/").map { HTML.percentEncoded(String($0)) }.joined(separator: "/")
            out += "<td class=\"file\"><a href=\"\(HTML.escape(link))\">\(HTML.escape(item.file))</a></td>"
        } else {
            out += "<td class=\"file\">\(HTML.escape(item.file))</td>"
        }
        out += "<td>\(badge(outcome.status))</td>"
        out +=
            "<td class=\"why\">\(why(reason: outcome.reason, message: outcome.message, warnings: outcome.warnings, writeError: item.writeError))</td>"
        out += "<td>\(outcome.vendor.map(HTML.escape) ?? "—")</td>"
        switch entries.count {
        case 0: out += "<td class=\"none\" colspan=\"6\">no media reference</td>"
        case 1: out += entryCells(entries[0])
        default: out += "<td class=\"none\" colspan=\"6\">\(entries.count) media entries, below</td>"
        }
        out += "<td class=\"timings\">\(timings(outcome.timingsMs))</td></tr>\n"
        if entries.count > 1 {
            for entry in entries {
                out += "<tr class=\"entry\" data-platform=\"\(HTML.escape(entry.platform))\">"
                out += "<td class=\"entry-status\" colspan=\"4\">↳ \(badge(entry.status)) "
                out += why(reason: entry.reason, message: entry.message, warnings: nil, writeError: nil) + "</td>"
                out += entryCells(entry) + "<td></td></tr>\n"
            }
        }
        if let summary = TemplateSummary(entries) { out += templateRow(summary) }
        return out
    }

    /// A multi-image template as the phone pages it: every image made, in order, and their
    /// decoded bytes against the notification's limit.
    private func templateRow(_ summary: TemplateSummary) -> String {
        var out = "<tr class=\"template\" data-template=\"\(HTML.escape(summary.name))\"><td colspan=\"11\">"
        out += "<div class=\"pages\">"
        for image in summary.images {
            guard let attachment = image.attachment, let link = storeLink(attachment.url) else { continue }
            out += "<img src=\"\(HTML.escape(link))\" alt=\"\(HTML.escape(image.path))\">"
        }
        return out + "</div><div class=\"template-line\">\(HTML.escape(summary.line))</div></td></tr>\n"
    }

    private func badge(_ status: OutcomeStatus) -> String {
        "<span class=\"badge status-\(status.rawValue)\">\(status.rawValue)</span>"
    }

    private func why(reason: String?, message: String?, warnings: [String]?, writeError: String?) -> String {
        var out = ""
        if let reason { out += "<code class=\"reason\">\(HTML.escape(reason))</code>" }
        if let message { out += "<div class=\"message\">\(HTML.escape(message))</div>" }
        for warning in warnings ?? [] { out += "<div class=\"warning\">⚠ \(HTML.escape(warning))</div>" }
        if let writeError { out += "<div class=\"warning\">not written: \(HTML.escape(writeError))</div>" }
        return out.isEmpty ? "—" : out
    }

    /// Media, type and size, after px, cache, before, after.
    private func entryCells(_ entry: MediaOutcome) -> String {
        var out = "<td class=\"media\"><span class=\"platform\">\(HTML.escape(entry.platform))</span>"
        if !entry.path.isEmpty { out += "<br><code>\(HTML.escape(entry.path))</code>" }
        out += "</td>"
        let before = [entry.sourceMIME, entry.sourceBytes.map(HTML.bytes)].compactMap { $0 }.joined(separator: " ")
        let after = [entry.attachment?.mime, entry.attachment.map { HTML.bytes($0.bytes) }].compactMap { $0 }.joined(
            separator: " ")
        out +=
            "<td class=\"types\">\(HTML.escape(before.isEmpty ? "—" : before)) → \(HTML.escape(after.isEmpty ? "—" : after))</td>"
        if let width = entry.attachment?.width, let height = entry.attachment?.height {
            out += "<td class=\"size\">\(width)×\(height)</td>"
        } else {
            out += "<td class=\"size\">—</td>"
        }
        out += "<td>\(entry.cacheHit.map { $0 ? "hit" : "miss" } ?? "—")</td>"
        out += "<td class=\"preview before\">\(beforePreview(entry))</td>"
        out += "<td class=\"preview after\">\(afterPreview(entry))</td>"
        return out
    }

    private func timings(_ t: StageTimings) -> String {
        let parts = [("fetch", t.fetch), ("sniff", t.sniff), ("transcode", t.transcode), ("store", t.store)]
            .map { "\($0.0) \(HTML.milliseconds($0.1))" }
        return parts.joined(separator: "<br>") + "<br><b>total \(HTML.milliseconds(t.total))</b>"
    }

    /// The source: embedded when it is a local file a browser shows and the media was accepted,
    /// linked when local otherwise (a rejected source may be a decompression bomb), else its URL as text.
    private func beforePreview(_ entry: MediaOutcome) -> String {
        guard let source = entry.sourceURL else { return "—" }
        guard let path = localPath(of: source) else { return "<code class=\"url\">\(HTML.escape(source))</code>" }
        let link = HTML.escape(HTML.relativeLink(from: reportDirectory, to: path))
        let name = HTML.escape((path as NSString).lastPathComponent)
        let accepted = [.processed, .passthrough, .bestAttempt].contains(entry.status)
        if accepted, let mime = entry.sourceMIME, Self.browserImageTypes.contains(mime.lowercased()) {
            return "<a href=\"\(link)\"><img src=\"\(link)\" alt=\"before: \(name)\"></a>"
        }
        let label = entry.sourceMIME.map { HTML.escape($0) } ?? "file"
        return "<a class=\"box\" href=\"\(link)\">\(label)<br>\(name)</a>"
    }

    /// The real path of a local media reference inside the media root, or nil (remote, outside, missing).
    private func localPath(of source: String) -> String? {
        guard let mediaRoot else { return nil }
        let trimmed = source.trimmingCharacters(in: .whitespaces)
        if let colon = trimmed.firstIndex(of: ":"), !trimmed[..<colon].contains("/"),
            trimmed[..<colon].lowercased() != "file"
        {
            return nil
        }
        return try? LocalSource.resolve(trimmed, root: mediaRoot)
    }

    /// The stored attachment (image, player, or a labelled box), plus links to the thumbnail and icon.
    private func afterPreview(_ entry: MediaOutcome) -> String {
        guard let attachment = entry.attachment else { return "—" }
        var out: String
        if let link = storeLink(attachment.url) {
            let src = HTML.escape(link)
            switch MediaOutcome.kind(ofMIME: attachment.mime) {
            case "image"?: out = "<a href=\"\(src)\"><img src=\"\(src)\" alt=\"after\"></a>"
            case "audio"?:
                out =
                    "<audio controls preload=\"metadata\" src=\"\(src)\"></audio><br><a href=\"\(src)\">\(HTML.escape(attachment.mime))</a>"
            case "video"?:
                out =
                    "<video controls preload=\"metadata\" src=\"\(src)\"></video><br><a href=\"\(src)\">\(HTML.escape(attachment.mime))</a>"
            default: out = "<a class=\"box\" href=\"\(src)\">\(HTML.escape(attachment.mime))</a>"
            }
        } else {
            out =
                "<span class=\"box missing\">not in the store<br><code class=\"url\">\(HTML.escape(attachment.url))</code></span>"
        }
        var extras: [String] = []
        if let thumbnail = entry.thumbnail, let link = storeLink(thumbnail.url) {
            extras.append("<a href=\"\(HTML.escape(link))\">thumbnail</a>")
        }
        if let icon = entry.icon, let link = storeLink(icon.url) {
            extras.append("<a href=\"\(HTML.escape(link))\">icon</a>")
        }
        if let hints = entry.hints, !hints.isEmpty {
            extras.append(HTML.escape("hints: " + NotificationCard.describe(hints)))
        }
        if !extras.isEmpty { out += "<div class=\"extras\">\(extras.joined(separator: " · "))</div>" }
        return out
    }

    /// `<store>/<name>` relative to the report, when `name` (the URL's last path component) is a
    /// store file that exists; for an object store, the attachment's http(s) URL.
    private func storeLink(_ url: String) -> String? {
        let path = URLComponents(string: url)?.path ?? url
        guard let name = path.split(separator: "/").last.map(String.init), MediaStore.isValidName(name) else {
            return nil
        }
        guard let storeDirectory else { return url.hasPrefix("https://") || url.hasPrefix("http://") ? url : nil }
        let file = storeDirectory + "/" + name
        guard access(file, R_OK) == 0 else { return nil }
        return HTML.relativeLink(from: reportDirectory, to: file)
    }

    static let css = """
        body { font-family: -apple-system, "Helvetica Neue", "Liberation Sans", Arial, sans-serif; margin: 24px; color: #1d1d1f; background: #fafafa; }
        h1 { margin: 0 0 4px; font-size: 22px; }
        .meta, .note { color: #555; font-size: 13px; overflow-wrap: anywhere; }
        .counts { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 8px; }
        .counts li { padding: 6px 12px; border-radius: 8px; background: #eee; }
        table.items { border-collapse: collapse; width: 100%; font-size: 13px; background: #fff; }
        th, td { border-bottom: 1px solid #e3e3e3; padding: 6px 8px; text-align: left; vertical-align: top; }
        th { position: sticky; top: 0; background: #f0f0f0; }
        tr.entry td { background: #fbfbfd; border-bottom-style: dashed; }
        td.file { font-weight: 600; overflow-wrap: anywhere; max-width: 220px; }
        td.why { max-width: 340px; overflow-wrap: anywhere; }
        td.timings { white-space: nowrap; color: #444; }
        td.none { color: #777; font-style: italic; }
        .message { color: #333; margin-top: 2px; }
        .warning { color: #8a5a00; margin-top: 2px; }
        code { font-size: 12px; overflow-wrap: anywhere; }
        code.url { display: inline-block; max-width: 220px; color: #444; }
        .badge { display: inline-block; padding: 2px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; white-space: nowrap; }
        .status-processed { background: #d8f5de; color: #0b5d1e; }
        .status-passthrough { background: #dcebff; color: #0b3d91; }
        .status-best_attempt { background: #fff1cc; color: #7a5200; }
        .status-rejected { background: #ffdcdc; color: #8f1111; }
        .status-skipped { background: #ececec; color: #444; }
        .preview img { display: block; max-width: 180px; max-height: 140px; background: repeating-conic-gradient(#ddd 0 25%, #fff 0 50%) 0 0 / 16px 16px; }
        .preview video { max-width: 220px; max-height: 160px; }
        .preview audio { width: 220px; }
        .box { display: inline-block; padding: 10px; border: 1px dashed #999; border-radius: 6px; color: #333; max-width: 200px; overflow-wrap: anywhere; }
        .missing { color: #8f1111; }
        .extras { font-size: 12px; margin-top: 4px; color: #555; }
        .template .pages { display: flex; gap: 6px; overflow-x: auto; }
        .template .pages img { height: 120px; border-radius: 6px; }
        .template-line { font-size: 12px; margin-top: 4px; color: #555; }
        .platform { font-weight: 600; }
        """
}
