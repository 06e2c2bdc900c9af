import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// `pushmedia batch` writes report.html beside report.json: checked as text and as headless
/// Chromium shows it (every preview image loads from disk, one row per report.json item).
@Suite("Batch report.html", .serialized)
struct BatchReportTests {
    /// A folder of payloads whose media are copies of samples, one with markup in its text and
    /// URL, one invalid, one without media, one in a subfolder with a space in its name.
    static func makeInput(_ work: TemporaryDirectory) throws -> String {
        let input = work.file("in")
        try FileManager.default.createDirectory(atPath: input + "/media", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: input + "/nested", withIntermediateDirectories: true)
        for name in [
            "photo-exif.jpg", "logo-alpha.png", "spinner.gif", "banner.webp", "chime.mp3", "clip.mp4", "truncated.jpg",
        ] {
            try Data(try sampleMedia(name)).write(to: URL(fileURLWithPath: input + "/media/" + name))
        }
        func payload(_ title: String, _ key: String, _ url: String) -> String {
            #"{"aps":{"alert":{"title":"\#(title)","body":"Body"},"mutable-content":1},"\#(key)":"\#(url)"}"#
        }
        let files: [(String, String)] = [
            ("photo.json", payload("Photo", "media_url", "media/photo-exif.jpg")),
            ("logo.json", payload("Logo", "image_url", "media/logo-alpha.png")),
            ("spinner.json", payload("Spinner", "media_url", "file:" + input + "/media/spinner.gif")),
            ("banner.json", payload("Banner", "imageUrl", "media/banner.webp")),
            ("chime.json", payload("Chime", "media_url", "media/chime.mp3")),
            ("clip.json", payload("Clip", "media_url", "media/clip.mp4")),
            ("truncated.json", payload("Truncated", "media_url", "media/truncated.jpg")),
            (
                "markup.json",
                payload(#"<script>alert(\"title\")</script>"#, "media_url", "javascript:alert('<script>x</script>')")
            ),
            ("no-media.json", #"{"aps":{"alert":"No media","mutable-content":1}}"#),
            ("invalid.json", #"{"aps":{"alert":"x",}"#),
            ("nested/a b.json", payload("Nested", "media_url", "media/logo-alpha.png")),
        ]
        for (name, text) in files { try Data(text.utf8).write(to: URL(fileURLWithPath: input + "/" + name)) }
        return input
    }

    struct Batch {
        let out: String
        let html: String
        /// report.json's items as (file, status).
        let items: [(String, String)]
    }

    static func runBatch(_ work: TemporaryDirectory) async throws -> Batch {
        let input = try makeInput(work)
        let run = try await CommandLineTests.runner.run {
            try CommandLineTests.launch(
                ["batch", input, "--out", work.file("out"), "--store", work.file("store"), "--concurrency", "2"],
                stdin: nil, environment: [:])
        }
        #expect(run.status == 0, "\(run.stderr)")
        #expect(String(decoding: run.stdout, as: UTF8.self).contains("report.html"))
        let report = try #require(
            try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("out/report.json")))).objectValue)
        let items = try #require(report["items"]?.arrayValue).compactMap(\.objectValue).map {
            ($0["file"]?.stringValue ?? "", $0["outcome"]?.objectValue?["status"]?.stringValue ?? "")
        }
        #expect(items.count == 11)
        let html = try String(contentsOfFile: work.file("out/report.html"), encoding: .utf8)
        #expect(
            ((try? FileManager.default.contentsOfDirectory(atPath: work.file("out"))) ?? []).allSatisfy {
                !$0.hasSuffix(".tmp")
            })
        return Batch(out: work.file("out"), html: html, items: items)
    }

    static func rows(_ tags: [HTMLTag]) -> [(String, String)] {
        tags.filter { $0.name == "tr" && $0.attributes["data-file"] != nil }
            .map { ($0.attributes["data-file"] ?? "", $0.attributes["data-status"] ?? "") }
    }

    @Test func reportHTMLHasOneRowPerItemAndLinksFilesOnDisk() async throws {
        let work = TemporaryDirectory()
        let batch = try await Self.runBatch(work)
        let tags = HTMLTags.scan(batch.html)
        #expect(Self.rows(tags).map(\.0) == batch.items.map(\.0))
        #expect(Self.rows(tags).map(\.1) == batch.items.map(\.1))
        #expect(Dictionary(uniqueKeysWithValues: batch.items)["truncated.json"] == "rejected")

        // Every image, player and link is a relative path to a file that exists.
        var images = 0
        for tag in tags where ["img", "audio", "video", "a"].contains(tag.name) {
            guard let link = tag.attributes[tag.name == "a" ? "href" : "src"] else { continue }
            #expect(!link.contains(":") && !link.hasPrefix("/"), "\(link)")
            #expect(
                FileManager.default.fileExists(atPath: batch.out + "/" + (link.removingPercentEncoding ?? link)),
                "\(tag.name) → \(link)")
            if tag.name == "img" { images += 1 }
        }
        // Before and after of photo, logo, spinner, banner and the nested logo; the truncated source is linked, not shown.
        #expect(images == 10)
        #expect(tags.contains { $0.name == "audio" } && tags.contains { $0.name == "video" })
        #expect(tags.contains { $0.name == "a" && $0.attributes["href"] == "nested/a%20b.json" })

        // The markup in the payload is text.
        #expect(batch.html.components(separatedBy: "<script").count == 2)
        #expect(batch.html.contains("javascript:alert(&#39;&lt;script&gt;x&lt;/script&gt;&#39;)"))
        #expect(batch.html.contains("<b>11</b>") || batch.html.contains("11 payloads"))
    }

    @Test func reportHTMLInHeadlessChromiumLoadsEveryImage() async throws {
        let work = TemporaryDirectory()
        let batch = try await Self.runBatch(work)
        let dom = try await Chromium.dumpDOM(file: batch.out + "/report.html")
        let tags = HTMLTags.scan(dom)
        let body = try #require(tags.first { $0.name == "body" })
        let loaded = try #require(body.attributes["data-images-loaded"], "the page's script did not run")
        let parts = loaded.split(separator: "/").compactMap { Int($0) }
        #expect(parts.count == 2 && parts[0] == parts[1] && parts[1] > 0, "images loaded: \(loaded)")
        #expect(parts.last == tags.filter { $0.name == "img" }.count)
        let rows = Self.rows(tags)
        #expect(rows.count == batch.items.count)
        for (row, item) in zip(rows, batch.items) {
            #expect(row.0 == item.0 && row.1 == item.1)
        }
        // The payload's markup stayed text in the browser too: no element came from it.
        #expect(tags.filter { $0.name == "script" }.count == 1)
    }
}
