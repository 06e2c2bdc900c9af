import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMediaTestSupport
import Testing

@testable import PushMedia
@testable import PushMediaServer

/// `GET /preview` and `POST /preview` through the router, and the page built from hand-made
/// outcomes with several media entries.
@Suite("Preview page")
struct PreviewTests {
    let origin: TestOrigin

    init() throws {
        origin = try TestOrigin()
        origin.route("/photo", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
    }

    static func form(_ payload: String, app: String? = nil) -> ByteBuffer {
        ByteBuffer(string: formText(payload, app: app))
    }

    /// `payload=<text>&app=<name>`, form-encoded as a browser sends it.
    static func formText(_ payload: String, app: String? = nil) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._*")
        func encode(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: allowed)!.replacingOccurrences(of: "%20", with: "+")
        }
        var body = "payload=" + encode(payload)
        if let app { body += "&app=" + encode(app) }
        return body
    }

    static let formType: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    @Test func formIsServedWhenNoAuthIsConfigured() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.execute(uri: "/preview", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "text/html; charset=utf-8")
                #expect(response.headers[.contentSecurityPolicy]?.contains("default-src 'none'") == true)
                #expect(response.headers[.cacheControl] == "no-store")
                let html = String(buffer: response.body)
                let tags = HTMLTags.scan(html)
                let form = try #require(tags.first { $0.name == "form" })
                #expect(form.attributes["method"] == "post" && form.attributes["action"] == "preview")
                #expect(tags.contains { $0.name == "textarea" && $0.attributes["name"] == "payload" })
                #expect(tags.contains { $0.name == "button" && $0.attributes["type"] == "submit" })
                #expect(html.contains("Paste a push payload"))
                #expect(!tags.contains { $0.name == "figure" }, "no card before a payload is sent")
            }
        }
    }

    @Test func postShowsThePayloadAsANotification() async throws {
        let server = try TestServer()
        let payload = #"""
            {"aps":{"alert":{"title":"Spring <script>alert(1)</script>","subtitle":"Garden","body":"Up to 40% off"},"mutable-content":1},
             "media_url":"\#(origin.url("/photo"))","deep_link":"shop://x?a=1&b=2"}
            """#
        try await server.test { client in
            try await client.execute(
                uri: "/preview", method: .post, headers: Self.formType, body: Self.form(payload, app: "Garden & Co")
            ) { response in
                #expect(response.status == .ok)
                #expect(response.headers[HTTPField.Name("X-PushMedia-Outcome")!] == "processed")
                let html = String(buffer: response.body)
                let tags = HTMLTags.scan(html)
                #expect(tags.filter { $0.name == "script" }.count == 1, "the payload's script stays text")
                // The form again, pre-filled.
                let textarea = try #require(tags.first { $0.name == "textarea" })
                #expect(textarea.text == payload)
                #expect(
                    tags.first { $0.name == "input" && $0.attributes["name"] == "app" }?.attributes["value"]
                        == "Garden & Co")
                // The iOS card: app name, text, the stored attachment from /media.
                let card = try #require(tags.first { $0.name == "figure" && $0.attributes["data-platform"] == "ios" })
                #expect(card.has(class: "nc-ios"))
                #expect(tags.first { $0.has(class: "nc-app") }?.text == "Garden & Co")
                #expect(tags.first { $0.has(class: "nc-title") }?.text == "Spring <script>alert(1)</script>")
                #expect(tags.first { $0.has(class: "nc-subtitle") }?.text == "Garden")
                #expect(tags.first { $0.has(class: "nc-body") }?.text == "Up to 40% off")
                let images = tags.filter { $0.name == "img" }.compactMap { $0.attributes["src"] }
                #expect(images.count == 2)
                #expect(images.allSatisfy { $0.hasPrefix("https://media.example.com/media/") && $0.hasSuffix(".jpg") })
                #expect(html.contains("thumbnail: whole image"))
                #expect(!tags.contains { $0.has(class: "nc-android") }, "no Android entry, no Android card")
                // The rewritten payload and the outcome, as text.
                let rewritten = try #require(tags.first { $0.name == "pre" && $0.has(class: "payload") })
                let object = try #require(try JSONValue.parse(Array(rewritten.text.utf8)).objectValue)
                #expect(object["media_url"]?.stringValue == images.first)
                #expect(object["deep_link"] == .string("shop://x?a=1&b=2"))
                let outcome = try #require(tags.first { $0.name == "pre" && $0.has(class: "outcome") })
                #expect(try JSONValue.parse(Array(outcome.text.utf8)).objectValue?["status"] == .string("processed"))
                #expect(
                    response.headers[.contentSecurityPolicy]?.contains("img-src 'self' https://media.example.com")
                        == true)
            }
        }
    }

    @Test func badFormsAnswerWithTheFormAndTheError() async throws {
        let server = try TestServer()
        try await server.test { client in
            // A form that was read answers 200 with the error on the page; one that could not be
            // read, or has no payload field, 400; one too large, 413.
            for (body, status, words) in [
                (Self.form("{\"aps\":"), HTTPResponse.Status.ok, "invalid JSON"),
                (Self.form("[1]"), .ok, "must be a JSON object"),
                (Self.form(" "), .ok, "is empty"),
                (ByteBuffer(string: "app=x"), .badRequest, "The form has no"),
                (ByteBuffer(string: "payload=%zz"), .badRequest, "could not be read"),
                (Self.form(String(repeating: "x", count: 70_000)), .contentTooLarge, "too large"),
            ] {
                try await client.execute(uri: "/preview", method: .post, headers: Self.formType, body: body) {
                    response in
                    #expect(response.status == status)
                    #expect(response.headers[.contentType] == "text/html; charset=utf-8")
                    let html = String(buffer: response.body)
                    #expect(html.contains("role=\"alert\"") && html.contains(words), "\(status): \(html.prefix(300))")
                    #expect(html.contains("<textarea"))
                }
            }
        }
    }

    @Test func offWhenAuthIsConfiguredUnlessPreviewIsGiven() async throws {
        for adjust in [
            { (server: inout ServerConfig) in server.tokens = ["t"] },
            { (server: inout ServerConfig) in server.hmacSecret = String(repeating: "s", count: 32) },
        ] {
            let locked = try TestServer(server: adjust)
            try await locked.test { client in
                try await client.execute(uri: "/preview", method: .get) { response in
                    #expect(response.status == .notFound)
                    #expect(String(buffer: response.body).contains("--preview"))
                }
                try await client.execute(uri: "/preview", method: .post, headers: Self.formType, body: Self.form("{}"))
                { response in
                    #expect(response.status == .notFound)
                }
            }
        }
        let opened = try TestServer(server: {
            $0.tokens = ["t"]
            $0.preview = true
        })
        try await opened.test { client in
            try await client.execute(uri: "/preview", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(string: "{}")) {
                #expect($0.status == .unauthorized)
            }
        }
        #expect(ServerConfig().previewEnabled)
        var config = ServerConfig()
        try config.set("token", to: "abc")
        #expect(!config.previewEnabled)
        config = try ServerConfig.fromEnvironment(["PUSHMEDIA_TOKENS": "abc", "PUSHMEDIA_PREVIEW": "1"])
        #expect(config.previewEnabled)
    }

    /// A carousel's card shows every page made, under its picture, and the notification's
    /// decoded bytes against Android's limit.
    @Test func aCarouselCardShowsEveryPage() throws {
        var outcome = Outcome(status: .processed)
        outcome.vendor = "clevertap"
        outcome.media = (1...3).map { page in
            var entry = MediaOutcome(path: "pt_img\(page)", platform: "android", status: .processed)
            entry.attachment = AttachmentInfo(
                url: "http://127.0.0.1:8080/media/" + String(format: "%064x", page) + ".jpg", mime: "image/jpeg",
                uti: nil, bytes: 50_000, width: 600, height: 400)
            entry.template = TemplateInfo(
                name: "pt_carousel", page: page, aspect: "3:2", maxBytes: 86_000, decodedBytes: 960_000,
                decodedLimit: 5_000_000)
            return entry
        }
        var page = PreviewPage(payload: "{}", appName: "Shop")
        page.result = PreviewPage.Result(
            payload: JSONObject([("pt_id", .string("pt_carousel")), ("pt_title", .string("Looks"))]), bytes: 100,
            outcome: outcome)
        let html = page.render()
        let pages = HTMLTags.scan(html).filter { $0.has(class: "nc-page") }
        let sources: [String] = pages.compactMap { $0.attributes["src"] }.map { String($0.suffix(6)) }
        #expect(sources == ["01.jpg", "02.jpg", "03.jpg"])
        #expect(html.contains("pt_carousel: 3 of 3 images made, 2,880,000 of 5,000,000 decoded bytes"))
    }

    @Test func anAndroidEntryGetsASecondCard() throws {
        func attachment(_ seed: Int, _ mime: String) -> AttachmentInfo {
            AttachmentInfo(
                url: "http://127.0.0.1:8080/media/" + String(format: "%064x", seed) + ".jpg", mime: mime, uti: nil,
                bytes: 1000, width: 512, height: 256)
        }
        var outcome = Outcome(status: .processed)
        outcome.vendor = "fcm"
        var ios = MediaOutcome(path: "message.apns.fcm_options.image", platform: "ios", status: .processed)
        ios.attachment = attachment(1, "image/jpeg")
        ios.hints = ThumbnailHints(hidden: true)
        var android = MediaOutcome(path: "message.android.notification.image", platform: "android", status: .processed)
        android.attachment = attachment(2, "image/jpeg")
        var huawei = MediaOutcome(path: "message.android.notification.image", platform: "huawei", status: .rejected)
        huawei.reason = "too_large"
        outcome.media = [ios, android, huawei]
        let payload = try #require(
            try JSONValue.parse(
                Array(
                    #"""
                    {"message":{"notification":{"title":"Common","body":"Shared body"},"android":{"notification":{"title":"Android title"}},
                     "apns":{"payload":{"aps":{"alert":{"title":"iOS title"},"mutable-content":1}}}}}
                    """#.utf8)
            ).objectValue)
        var page = PreviewPage(payload: "{}", appName: "Shop")
        page.result = PreviewPage.Result(payload: payload, bytes: 200, outcome: outcome)
        let html = page.render()
        let tags = HTMLTags.scan(html)
        let cards = tags.filter { $0.name == "figure" }
        #expect(cards.map { $0.attributes["data-platform"] } == ["ios", "android"])
        #expect(tags.filter { $0.has(class: "nc-title") }.map(\.text) == ["iOS title", "Android title"])
        #expect(tags.filter { $0.has(class: "nc-body") }.map(\.text) == ["Shared body", "Shared body"])
        #expect(!tags.contains { $0.has(class: "nc-thumb") }, "the thumbnail is hidden")
        #expect(html.contains("thumbnail: hidden"))
        #expect(
            tags.filter { $0.name == "img" }.compactMap { $0.attributes["src"] } == [
                ios.attachment!.url, android.attachment!.url,
            ])
        #expect(page.policy.contains("img-src 'self' http://127.0.0.1:8080"))
        #expect(html.contains("vendor fcm"))
    }
}
