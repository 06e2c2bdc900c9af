import Foundation
import PushMedia
import PushMediaTestSupport
import Testing

/// `/preview` of a real `pushmedia serve`, as headless Chromium shows the answer.
@Suite("Preview in a browser", .serialized)
struct PreviewBrowserTests {
    @Test func previewPageLoadsTheAttachmentInHeadlessChromium() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/campaign/hero", .file(body: try sampleMedia("banner.webp"), contentType: "application/octet-stream"))
        let store = TemporaryDirectory()
        let server = try ServeEndToEndTests.Server(arguments: ["--store", store.path, "--allow-private-networks"])
        let title = "Spring deals & more"
        let payload =
            #"{"aps":{"alert":{"title":"\#(title)","body":"Up to 40% off"},"mutable-content":1},"image_url":"\#(origin.url("/campaign/hero"))"}"#

        let (form, formHTML) = try await ServeProcess.request(server.url("/preview"))
        #expect(form.statusCode == 200)
        #expect(String(decoding: formHTML, as: UTF8.self).contains("<textarea"))

        let (response, data) = try await ServeProcess.request(
            server.url("/preview"), method: "POST", body: PreviewTests.formText(payload),
            headers: ["Content-Type": "application/x-www-form-urlencoded"])
        #expect(response.statusCode == 200)
        #expect(response.value(forHTTPHeaderField: "X-PushMedia-Outcome") == "processed")
        let page = TemporaryDirectory()
        try data.write(to: URL(fileURLWithPath: page.file("preview.html")))
        let html = String(decoding: data, as: UTF8.self)
        #expect(html.contains("src=\"http://127.0.0.1:\(server.port)/media/"))

        let dom = try await Chromium.dumpDOM(file: page.file("preview.html"))
        let tags = HTMLTags.scan(dom)
        let loaded = try #require(
            tags.first { $0.name == "body" }?.attributes["data-images-loaded"], "the page's script did not run")
        let parts = loaded.split(separator: "/").compactMap { Int($0) }
        #expect(parts.count == 2 && parts[0] == parts[1] && parts[1] > 0, "images loaded: \(loaded)")
        #expect(tags.first { $0.has(class: "nc-title") }?.text == title)
        #expect(tags.first { $0.name == "figure" }?.attributes["data-platform"] == "ios")
        #expect(server.stop() == 0)
    }
}
