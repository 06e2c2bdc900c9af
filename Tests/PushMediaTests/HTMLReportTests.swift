import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// report.html and the notification card, rendered from hand-built outcomes (several media
/// entries, an Android one among them) and checked as text: escaping, one row per payload,
/// relative links that reach real files.
@Suite("HTML report")
struct HTMLReportTests {
    /// A folder with `out/` (the report's), `store/` (with files under store names) and `in/media/`.
    final class Layout: @unchecked Sendable {
        let work = TemporaryDirectory()
        var out: String { work.file("out") }
        var store: String { work.file("store") }
        var input: String { work.file("in") }

        init() throws {
            for directory in [out, store, input + "/media"] {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
        }

        /// Writes `bytes` into the store under a content-like name and returns the name.
        func stored(_ bytes: [UInt8], ext: String, seed: Int) throws -> String {
            let name = String(format: "%064x", seed) + "." + ext
            try Data(bytes).write(to: URL(fileURLWithPath: store + "/" + name))
            return name
        }
    }

    static func attachment(_ name: String, mime: String, width: Int? = nil, height: Int? = nil) -> AttachmentInfo {
        AttachmentInfo(
            url: "https://cdn.example.com/m/" + name, mime: mime, uti: nil, bytes: 1234, width: width, height: height)
    }

    /// An FCM-like outcome with an iOS, an Android and a web entry.
    static func multiEntryOutcome(_ layout: Layout) throws -> Outcome {
        let photo = try layout.stored(try sampleMedia("photo-exif.jpg"), ext: "jpg", seed: 1)
        let banner = try layout.stored(try sampleMedia("logo-alpha.png"), ext: "png", seed: 2)
        let icon = try layout.stored(try sampleMedia("logo-alpha.png"), ext: "png", seed: 3)
        var outcome = Outcome(status: .processed)
        outcome.vendor = "fcm"
        outcome.mediaKey = "message.apns.fcm_options.image"
        var ios = MediaOutcome(path: "message.apns.fcm_options.image", platform: "ios", status: .processed)
        ios.sourceURL = "https://cdn.shop.example/hero.heic"
        ios.sourceMIME = "image/heic"
        ios.sourceBytes = 300_000
        ios.attachment = attachment(photo, mime: "image/jpeg", width: 2048, height: 1536)
        ios.hints = ThumbnailHints(clip: ClipRect(x: 0.25, y: 0, width: 0.5, height: 1))
        var android = MediaOutcome(path: "message.android.notification.image", platform: "android", status: .processed)
        android.sourceURL = "https://cdn.shop.example/hero.heic"
        android.attachment = attachment(banner, mime: "image/png", width: 800, height: 600)
        var web = MediaOutcome(path: "message.webpush.notification.image", platform: "web", status: .rejected)
        web.reason = "http_404"
        web.message = "https://cdn.shop.example/web.png: the origin answered 404"
        web.icon = attachment(icon, mime: "image/png")
        outcome.media = [ios, android, web]
        outcome.attachment = ios.attachment
        outcome.sourceURL = ios.sourceURL
        return outcome
    }

    @Test func escapeTurnsMarkupIntoText() {
        #expect(
            HTML.escape(#"<script>alert("x") & 'y'</script>"#)
                == "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;")
        #expect(HTML.escape("plain text, ünïcode ✓") == "plain text, ünïcode ✓")
        #expect(HTML.safeURL("javascript:alert(1)") == nil)
        #expect(HTML.safeURL(" JavaScript:alert(1)") == nil)
        #expect(HTML.safeURL("data:image/png;base64,AAAA") == nil)
        #expect(HTML.safeURL("//evil.example/x.png") == nil)
        #expect(HTML.safeURL("https://cdn.example.com/a.jpg") == "https://cdn.example.com/a.jpg")
        #expect(HTML.safeURL("../store/a:b.jpg") == "../store/a:b.jpg")
        #expect(HTML.origin(of: "http://127.0.0.1:8080/media/x.jpg") == "http://127.0.0.1:8080")
        #expect(HTML.origin(of: "https://media.example.com/m/x.jpg") == "https://media.example.com")
    }

    @Test func untrustedPayloadTextAndURLsAreEscaped() throws {
        let layout = try Layout()
        var outcome = Outcome(
            status: .rejected, reason: "unsupported_scheme",
            message: #"evil.json: javascript:alert('<script>x</script>'): "javascript" is not http or https"#)
        outcome.mediaKey = "media_url"
        outcome.sourceURL = "javascript:alert('<script>x</script>')"
        outcome.vendor = "<b>vendor</b>"
        outcome.warnings = ["<img src=x onerror=alert(1)>"]
        var remote = Outcome(
            status: .rejected, reason: "http_404", message: "https://cdn.example.com/<script>1</script>.jpg: 404")
        remote.mediaKey = "media_url"
        remote.sourceURL = "https://cdn.example.com/<script>1</script>.jpg"
        let items = [
            HTMLReport.Item(file: "<script>evil</script>.json", output: nil, outcome: outcome),
            HTMLReport.Item(file: "remote.json", output: "remote.json", outcome: remote),
        ]
        let html = HTMLReport(
            items: items, summary: .init(outcomes: items.map(\.outcome)), reportDirectory: layout.out,
            storeDirectory: layout.store, mediaRoot: layout.input
        ).render()
        #expect(html.components(separatedBy: "<script").count == 2, "only the page's own script")
        #expect(!html.contains("<img src=x"))
        #expect(!html.contains("<b>vendor"))
        #expect(html.contains("&lt;script&gt;evil&lt;/script&gt;.json"))
        #expect(html.contains("https://cdn.example.com/&lt;script&gt;1&lt;/script&gt;.jpg"))
        // A remote source is text, never a link or an image: the report loads nothing from the network.
        let tags = HTMLTags.scan(html)
        for tag in tags {
            for name in ["src", "href"] {
                guard let value = tag.attributes[name] else { continue }
                #expect(!value.contains(":"), "\(tag.name) \(name)=\(value)")
            }
        }
        #expect(
            tags.first { $0.name == "tr" && $0.attributes["data-file"] != nil }?.attributes["data-file"]
                == "<script>evil</script>.json")

        let card = NotificationCard(
            style: .ios, appName: "<i>App</i>",
            text: NotificationText(title: "<script>t</script>", subtitle: "\"sub\"", body: "a & b"),
            media: .init(source: "javascript:alert(1)", mime: "image/jpeg")
        ).html()
        #expect(!card.contains("<script") && !card.contains("<i>") && !card.contains("javascript:"))
        #expect(
            card.contains("&lt;script&gt;t&lt;/script&gt;") && card.contains("&quot;sub&quot;")
                && card.contains("a &amp; b"))
    }

    @Test func oneRowPerPayloadAndOneSubRowPerMediaEntry() throws {
        let layout = try Layout()
        let multi = try Self.multiEntryOutcome(layout)
        var single = Outcome(status: .passthrough)
        single.mediaKey = "image_url"
        single.sourceURL = "https://cdn.example.com/logo.png"
        single.attachment = Self.attachment(
            try layout.stored(try sampleMedia("logo-alpha.png"), ext: "png", seed: 4), mime: "image/png")
        single.cacheHit = true
        let skipped = Outcome(status: .skipped, reason: "no_media", message: "no media reference")
        let items = [
            HTMLReport.Item(file: "fcm.json", output: "fcm.json", outcome: multi),
            HTMLReport.Item(file: "single.json", output: "single.json", outcome: single),
            HTMLReport.Item(file: "nested/no media.json", output: "nested/no media.json", outcome: skipped),
        ]
        let html = HTMLReport(
            items: items, summary: .init(outcomes: items.map(\.outcome)), reportDirectory: layout.out,
            storeDirectory: layout.store, mediaRoot: layout.input
        ).render()
        let tags = HTMLTags.scan(html)
        let rows = tags.filter { $0.name == "tr" && $0.attributes["data-file"] != nil }
        #expect(rows.map { $0.attributes["data-file"] } == items.map(\.file))
        #expect(rows.map { $0.attributes["data-status"] } == ["processed", "passthrough", "skipped"])
        let entries = tags.filter { $0.name == "tr" && $0.has(class: "entry") }
        #expect(entries.map { $0.attributes["data-platform"] } == ["ios", "android", "web"])
        #expect(html.contains("3 media entries"))
        #expect(
            html.contains("fcm") && html.contains("http_404")
                && html.contains("hints: clip x 0.25 y 0.00 w 0.50 h 1.00"))
        #expect(html.contains("image/heic 300.0 kB → image/jpeg 1.2 kB"))
        #expect(html.contains("2048×1536"))
        #expect(
            tags.first { $0.name == "li" && $0.attributes["data-status"] == "processed" }?.attributes["data-count"]
                == "1")
        #expect(tags.first { $0.name == "a" && $0.attributes["href"] == "nested/no%20media.json" } != nil)
        // With `media` nil the top-level fields are the one entry.
        #expect(single.mediaEntries.count == 1 && single.mediaEntries[0].cacheHit == true)
        #expect(skipped.mediaEntries.isEmpty)
    }

    @Test func relativeLinksReachTheStoreAndLocalSourcesOnDisk() throws {
        let layout = try Layout()
        try Data(try sampleMedia("banner.webp")).write(to: URL(fileURLWithPath: layout.input + "/media/banner.webp"))
        var local = Outcome(status: .processed)
        local.mediaKey = "media_url"
        local.sourceURL = "media/banner.webp"
        local.sourceMIME = "image/webp"
        local.attachment = Self.attachment(
            try layout.stored(try sampleMedia("photo-exif.jpg"), ext: "jpg", seed: 5), mime: "image/jpeg")
        var audio = Outcome(status: .passthrough)
        audio.mediaKey = "media_url"
        audio.sourceURL = "file://" + layout.input + "/media/banner.webp"
        audio.sourceMIME = "audio/mpeg"
        audio.attachment = Self.attachment(
            try layout.stored(try sampleMedia("chime.mp3"), ext: "mp3", seed: 6), mime: "audio/mpeg")
        var video = Outcome(status: .passthrough)
        video.mediaKey = "media_url"
        video.attachment = Self.attachment(
            try layout.stored(try sampleMedia("clip.mp4"), ext: "mp4", seed: 7), mime: "video/mp4")
        var gone = Outcome(status: .processed)
        gone.mediaKey = "media_url"
        gone.attachment = Self.attachment(String(repeating: "f", count: 64) + ".jpg", mime: "image/jpeg")
        var outside = Outcome(status: .rejected, reason: "path_outside_root")
        outside.mediaKey = "media_url"
        outside.sourceURL = "../../etc/passwd"
        let multi = try Self.multiEntryOutcome(layout)
        let items = [local, audio, video, gone, outside, multi].enumerated().map {
            HTMLReport.Item(file: "p\($0.offset).json", output: nil, outcome: $0.element)
        }
        let html = HTMLReport(
            items: items, summary: .init(outcomes: items.map(\.outcome)), reportDirectory: layout.out,
            storeDirectory: layout.store, mediaRoot: layout.input
        ).render()
        let tags = HTMLTags.scan(html)
        var checked = 0
        for tag in tags where ["img", "audio", "video", "a"].contains(tag.name) {
            guard let link = tag.attributes[tag.name == "a" ? "href" : "src"] else { continue }
            #expect(!link.contains(":") && !link.hasPrefix("/"), "\(link) is not relative")
            let path = layout.out + "/" + (link.removingPercentEncoding ?? link)
            #expect(FileManager.default.fileExists(atPath: path), "\(tag.name) → \(link)")
            checked += 1
        }
        #expect(checked >= 10)
        let images = tags.filter { $0.name == "img" }.compactMap { $0.attributes["src"] }
        #expect(images.contains("../in/media/banner.webp"), "the local source is shown from disk")
        #expect(images.contains { $0.hasPrefix("../store/") })
        #expect(tags.contains { $0.name == "audio" } && tags.contains { $0.name == "video" })
        #expect(html.contains("not in the store"))
        #expect(!html.contains("passwd\""), "a source outside the media root is not linked")
    }

    @Test func notificationTextInTheKnownShapes() throws {
        func parse(_ text: String) throws -> JSONObject {
            try #require(try JSONValue.parse(Array(text.utf8)).objectValue)
        }
        #expect(
            NotificationText.find(in: try parse(#"{"aps":{"alert":"Just a body"}}"#))
                == NotificationText(body: "Just a body"))
        #expect(
            NotificationText.find(in: try parse(#"{"aps":{"alert":{"title":"T","subtitle":"S","body":"B"}}}"#))
                == NotificationText(title: "T", subtitle: "S", body: "B"))
        let fcm = try parse(
            #"""
            {"message":{"notification":{"title":"Common","body":"Common body"},
              "apns":{"payload":{"aps":{"alert":{"title":"iOS title"}}}},
              "android":{"notification":{"body":"Android body"}}}}
            """#)
        #expect(
            NotificationText.find(in: fcm, platform: "ios") == NotificationText(title: "iOS title", body: "Common body")
        )
        #expect(
            NotificationText.find(in: fcm, platform: "android")
                == NotificationText(title: "Common", body: "Android body"))
        let airship = try parse(
            #"""
            {"aps":{"alert":"Alert text"},"com.urbanairship.media_attachment":{"url":["https://x.example/a.jpg"],
              "content":{"title":"Air title","subtitle":"Air sub"}}}
            """#)
        #expect(
            NotificationText.find(in: airship)
                == NotificationText(title: "Air title", subtitle: "Air sub", body: "Alert text"))
        #expect(NotificationText.find(in: try parse(#"{"aps":{"content-available":1}}"#)).isEmpty)
    }

    @Test func cardsShowTheAttachmentAndItsThumbnailHints() throws {
        let layout = try Layout()
        let outcome = try Self.multiEntryOutcome(layout)
        let text = NotificationText(title: "Spring deals", body: "Up to 40% off")
        let ios = NotificationCard(
            style: .ios, appName: "Shop", text: text, entry: outcome.mediaEntries.first { $0.platform == "ios" }
        ).html()
        #expect(ios.contains("data-platform=\"ios\"") && ios.contains("<div class=\"nc-title\">Spring deals</div>"))
        #expect(ios.contains("nc-thumb") && ios.contains("width:200.00%") && ios.contains("left:-50.00%"))
        #expect(ios.contains("thumbnail: clip x 0.25 y 0.00 w 0.50 h 1.00"))
        let android = try #require(outcome.mediaEntries.first { $0.isAndroidLike })
        let card = NotificationCard(style: .android, appName: "Shop", text: text, entry: android).html()
        #expect(
            card.contains("nc-android") && card.contains("data-platform=\"android\"")
                && card.contains(android.attachment!.url))
        let web = try #require(outcome.mediaEntries.last)
        let rejected = NotificationCard(style: .android, appName: "Shop", text: text, entry: web).html()
        #expect(!rejected.contains("<img") && rejected.contains("no attachment: rejected (http_404)"))
        var audio = MediaOutcome(path: "media_url", platform: "ios", status: .passthrough)
        audio.attachment = Self.attachment(String(repeating: "a", count: 64) + ".mp3", mime: "audio/mpeg")
        let sound = NotificationCard(style: .ios, appName: "Shop", text: text, entry: audio).html()
        #expect(sound.contains("<audio") && !sound.contains("<img"))
    }
}
