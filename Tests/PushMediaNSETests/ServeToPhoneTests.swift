import Foundation
import PushMedia
import PushMediaNSE
import PushMediaTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The whole trip: a payload goes through a real `pushmedia serve` (fetching from the test
/// origin), and the phone side finds, downloads and checks the attachment the server stored,
/// for every vendor's payload shape.
@Suite("PushMediaNSE with pushmedia serve", .serialized)
struct ServeToPhoneTests {
    /// The APNs payload as the phone receives it: a Firebase message's `apns.payload` with its
    /// `fcm_options` beside `aps`; any other payload as it is.
    static func delivered(_ payload: JSONObject) throws -> [AnyHashable: Any] {
        var apns = payload
        if let message = payload["message"]?.objectValue, let part = message["apns"]?.objectValue {
            apns = part["payload"]?.objectValue ?? JSONObject()
            if let options = part["fcm_options"] { apns["fcm_options"] = options }
        }
        return try userInfo(Data(JSONValue.object(apns).serialized()))
    }

    static func process(_ server: ServeProcess, _ json: String) async throws -> JSONObject {
        let (response, data) = try await ServeProcess.request(
            server.url("/v1/process"), method: "POST", body: json,
            headers: ["Content-Type": "application/json"])
        #expect(response.statusCode == 200, "\(String(decoding: data, as: UTF8.self))")
        return try #require(try JSONValue.parse(data).objectValue?["payload"]?.objectValue)
    }

    struct Case {
        var name: String
        var payload: String
        /// Where the attachment URL is in the rewritten payload.
        var at: JSONPath
        var type: AttachmentType
        var check: @Sendable (AttachmentOptions) -> Bool = { _ in true }
    }

    @Test func everyVendorsPayloadArrivesOnThePhone() async throws {
        let origin = try TestOrigin()
        for name in [
            "photo-exif.jpg", "banner.webp", "sunset.avif", "logo-alpha.png", "no-extension", "spinner.gif",
            "scan.tiff",
            "diagram.bmp", "chime.mp3", "clip.mp4",
        ] {
            origin.route("/m/" + name, .file(body: try sampleMedia(name), contentType: "application/octet-stream"))
        }
        let store = TemporaryDirectory()
        let server = try ServeProcess(arguments: ["--store", store.path, "--allow-private-networks"])
        defer { _ = server.stop() }
        let aps = #""aps":{"alert":{"title":"Deals","body":"Up to 40% off"},"mutable-content":1}"#
        func url(_ name: String) -> String { origin.url("/m/" + name) }
        let cases: [Case] = [
            Case(
                name: "generic", payload: #"{\#(aps),"image_url":"\#(url("photo-exif.jpg"))"}"#,
                at: JSONPath(keys: "image_url"), type: .jpeg),
            Case(
                name: "poster", payload: #"{\#(aps),"posterImageURL":"\#(url("banner.webp"))"}"#,
                at: JSONPath(keys: "posterImageURL"), type: .jpeg),
            Case(
                name: "fcm",
                payload:
                    #"{"message":{"token":"t","notification":{"title":"Sale","body":"Now"},"apns":{"payload":{"aps":{"sound":"default"}},"fcm_options":{"image":"\#(url("banner.webp"))"}}}}"#,
                at: JSONPath(keys: "message", "apns", "fcm_options", "image"), type: .jpeg),
            Case(
                name: "onesignal",
                payload: #"{\#(aps),"att":{"id1":"\#(url("sunset.avif"))","id2":"\#(url("logo-alpha.png"))"}}"#,
                at: JSONPath(keys: "att", "id1"), type: .jpeg),
            Case(
                name: "airship",
                payload:
                    #"{\#(aps),"com.urbanairship.media_attachment":{"url":["\#(url("photo-exif.jpg"))"],"options":{"crop":{"x":0.1,"y":0,"width":0.8,"height":1},"hidden":false}}}"#,
                at: JSONPath([.key("com.urbanairship.media_attachment"), .key("url"), .index(0)]), type: .jpeg,
                check: { $0.clip == .init(x: 0.1, y: 0, width: 0.8, height: 1) && $0.thumbnailHidden == false }),
            Case(
                name: "braze", payload: #"{\#(aps),"ab":{"att":{"url":"\#(url("no-extension"))","type":"png"}}}"#,
                at: JSONPath(keys: "ab", "att", "url"), type: .jpeg),
            Case(
                name: "clevertap", payload: #"{\#(aps),"ct_mediaUrl":"\#(url("spinner.gif"))","ct_mediaType":"image"}"#,
                at: JSONPath(keys: "ct_mediaUrl"), type: .gif,
                check: { if case .frame? = $0.thumbnailTime { true } else { false } }),
            Case(
                name: "iterable", payload: #"{\#(aps),"itbl":{"attachment-url":"\#(url("scan.tiff"))"}}"#,
                at: JSONPath(keys: "itbl", "attachment-url"), type: .jpeg),
            Case(
                name: "customerio", payload: #"{\#(aps),"CIO":{"push":{"image":"\#(url("diagram.bmp"))"}}}"#,
                at: JSONPath(keys: "CIO", "push", "image"), type: .jpeg),
            Case(
                name: "audio", payload: #"{\#(aps),"media_url":"\#(url("chime.mp3"))"}"#,
                at: JSONPath(keys: "media_url"), type: .mp3),
            Case(
                name: "video", payload: #"{\#(aps),"media_url":"\#(url("clip.mp4"))"}"#,
                at: JSONPath(keys: "media_url"), type: .mp4),
        ]
        for item in cases {
            let rewritten = try await Self.process(server, item.payload)
            let stored = try #require(
                JSONValue.object(rewritten)[path: item.at]?.stringValue, "\(item.name): no URL at \(item.at)")
            #expect(stored.hasPrefix("http://127.0.0.1:\(server.port)/media/"), "\(item.name)")
            let info = try Self.delivered(rewritten)
            let directory = TemporaryDirectory()
            let loader = AttachmentLoader(userInfo: info, configuration: configuration(directory))
            #expect(loader.descriptor != nil, "\(item.name): the descriptor is read")
            let (outcome, _) = await load(info, configuration(directory))
            guard case let .attachment(attachment) = outcome else {
                Issue.record("\(item.name): \(outcome)")
                continue
            }
            #expect(
                attachment.source.absoluteString == stored, "\(item.name): the attachment is the one the server wrote")
            #expect(attachment.file.type == item.type, "\(item.name)")
            #expect(attachment.file.fileURL.pathExtension == item.type.fileExtension, "\(item.name)")
            #expect(attachment.options.typeHint == item.type.uti, "\(item.name)")
            #expect(item.check(attachment.options), "\(item.name): \(attachment.options)")
            let name = String(stored.split(separator: "/").last!)
            #expect(
                try Data(contentsOf: attachment.file.fileURL)
                    == Data(contentsOf: URL(fileURLWithPath: store.file(name))), "\(item.name)")
        }
    }

    /// A campaign tool's payload carries a media URL as it is (no `/v1/process`): the phone's
    /// downloader gets the file made for it, of the type the URL's extension names, also when
    /// the source's own name says otherwise (`logo.png` behind `@jpg`) or it has none.
    @Test func aMediaURLInACampaignPayloadArrivesOnThePhone() async throws {
        let origin = try TestOrigin()
        origin.route("/c/banner", .file(body: try sampleMedia("banner.webp"), contentType: nil))
        origin.route("/c/logo.png", .file(body: try sampleMedia("logo-alpha.png"), contentType: "image/png"))
        origin.route("/c/clip.webm", .file(body: try sampleMedia("clip.webm"), contentType: "video/webm"))
        let store = TemporaryDirectory()
        let server = try ServeProcess(arguments: [
            "--store", store.path, "--allow-private-networks", "--url-allow-source", origin.url("/c/"),
        ])
        defer { _ = server.stop() }
        let aps = #""aps":{"alert":{"title":"Spring","body":"New in"},"mutable-content":1}"#
        for (name, ext, type) in [
            ("banner", "jpg", AttachmentType.jpeg), ("logo.png", "jpg", .jpeg), ("logo.png", "png", .png),
            ("clip.webm", "mp4", .mp4),
        ] {
            let url = "http://127.0.0.1:\(server.port)/insecure/pr:ios/plain/" + origin.url("/c/" + name) + "@" + ext
            let info = try userInfo(Data(#"{\#(aps),"image_url":"\#(url)"}"#.utf8))
            let directory = TemporaryDirectory()
            let (outcome, _) = await load(info, configuration(directory))
            guard case let .attachment(attachment) = outcome else {
                Issue.record("\(name)@\(ext): \(outcome)")
                continue
            }
            #expect(attachment.source.absoluteString == url)
            #expect(attachment.file.type == type, "\(name)@\(ext)")
            #expect(attachment.file.fileURL.pathExtension == type.fileExtension, "\(name)@\(ext)")
        }
    }

    /// A CleverTap slider through the server: the phone attaches every image the server made,
    /// in the slider's order, each the file the server stored; the item the origin had not is
    /// gone from the payload and from the attachments.
    @Test func aSlidersEveryImageArrivesOnThePhone() async throws {
        let origin = try TestOrigin()
        for name in ["photo-exif.jpg", "banner.webp", "sunset.avif"] {
            origin.route("/s/" + name, .file(body: try sampleMedia(name), contentType: "application/octet-stream"))
        }
        let store = TemporaryDirectory()
        let server = try ServeProcess(arguments: ["--store", store.path, "--allow-private-networks"])
        defer { _ = server.stop() }
        let items = ["photo-exif.jpg", "missing.jpg", "banner.webp", "sunset.avif"].map {
            #"{"caption":"\#($0)","imageUrl":"\#(origin.url("/s/" + $0))"}"#
        }
        let rewritten = try await Self.process(
            server,
            #"{"aps":{"alert":{"title":"Slides","body":"New in"},"mutable-content":1,"category":"CTNotification"},"#
                + #""ct_ContentSlider":{"orientation":"landscape","items":[\#(items.joined(separator: ","))]}}"#)
        let stored = try #require(
            JSONValue.object(rewritten)[path: JSONPath(keys: "ct_ContentSlider", "items")]?.arrayValue
        ).compactMap { $0.objectValue?["imageUrl"]?.stringValue }
        #expect(stored.count == 3 && stored.allSatisfy { $0.hasPrefix("http://127.0.0.1:\(server.port)/media/") })
        let directory = TemporaryDirectory()
        let loader = AttachmentGroupLoader(
            userInfo: try Self.delivered(rewritten), configuration: configuration(directory))
        #expect(loader.count == 3)
        let report = await withCheckedContinuation {
            (continuation: CheckedContinuation<AttachmentGroupLoader.Report, Never>) in
            loader.start { continuation.resume(returning: $0) }
        }
        #expect(report.attachments.map(\.source.absoluteString) == stored, "\(report)")
        for (attachment, url) in zip(report.attachments, stored) {
            let name = String(url.split(separator: "/").last!)
            #expect(
                try Data(contentsOf: attachment.file.fileURL)
                    == Data(contentsOf: URL(fileURLWithPath: store.file(name))))
            #expect([.jpeg, .png].contains(attachment.file.type))
        }
    }

    /// The video's descriptor carries its poster frame; when the movie itself is missing, the
    /// phone shows the poster.
    @Test func aMissingMovieFallsBackToItsPoster() async throws {
        let origin = try TestOrigin()
        origin.route("/clip.mp4", .file(body: try sampleMedia("clip.mp4"), contentType: "video/mp4"))
        let store = TemporaryDirectory()
        let server = try ServeProcess(arguments: ["--store", store.path, "--allow-private-networks"])
        defer { _ = server.stop() }
        let rewritten = try await Self.process(server, payload(media: origin.url("/clip.mp4")))
        let movie = try #require(rewritten["media_url"]?.stringValue)
        let name = String(movie.split(separator: "/").last!)
        try FileManager.default.removeItem(atPath: store.file(name))

        let directory = TemporaryDirectory()
        let (outcome, _) = await load(try Self.delivered(rewritten), configuration(directory))
        guard case let .thumbnail(poster, because) = outcome else {
            Issue.record("expected the poster, got \(outcome)")
            return
        }
        #expect(because == .http(status: 404, url: movie))
        #expect(poster.file.type == .jpeg && poster.options.typeHint == "public.jpeg")
        let thumb = try #require(rewritten["pushmedia"]?.objectValue?["thumb"]?.stringValue)
        #expect(poster.source.absoluteString == thumb)
    }
}
