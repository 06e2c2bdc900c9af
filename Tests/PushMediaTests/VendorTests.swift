import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// Vendor payload shapes, platform profiles and thumbnail hints, with the real libraries: the
/// vendor samples in `samples/` and media served by a real origin on 127.0.0.1.
@Suite("Vendors and profiles")
struct VendorTests {
    let store = TemporaryDirectory()

    func pipeline(_ adjust: (inout PushMediaConfig) -> Void = { _ in }) throws -> Pipeline {
        var config = testConfig(store: store)
        config.mediaRoot = samplesDirectory
        adjust(&config)
        return try Pipeline(config: config)
    }

    func sample(_ name: String) throws -> JSONObject {
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: samplesDirectory + "/" + name)))
        return try #require(try JSONValue.parse(bytes).objectValue)
    }

    /// The header of the stored file behind an attachment URL, checking the file's real type.
    func stored(_ url: String?, is format: MediaFormat) throws -> ImageHeader {
        let name = try #require(url?.split(separator: "/").last.map(String.init))
        #expect(name.hasSuffix("." + format.fileExtension))
        let path = store.file(name)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(Sniffer.sniff(bytes[...]).format == format)
        return try Transcoder(config: PushMediaConfig()).header(path: path)
    }

    func string(_ payload: JSONObject, _ path: String...) -> String? {
        payload[path: JSONPath(path.map(JSONPath.Step.key))]?.stringValue
    }

    // MARK: detection

    @Test(arguments: [
        ("01-photo-exif.json", Vendor.generic, ["media_url"]),
        ("22-fcm-message.json", .fcm, ["message.apns.fcm_options.image", "message.android.notification.image"]),
        ("23-fcm-webpush.json", .fcm, ["message.webpush.notification.image"]),
        ("24-fcm-apns.json", .fcm, ["fcm_options.image"]),
        ("25-onesignal.json", .onesignal, ["att.id1", "att.id2"]),
        ("26-airship.json", .airship, [#""com.urbanairship.media_attachment".url[0]"#]),
        ("27-braze.json", .braze, ["ab.att.url"]),
        ("28-clevertap.json", .clevertap, ["ct_mediaUrl"]),
        ("29-iterable.json", .iterable, ["itbl.attachment-url"]),
        ("30-customerio.json", .customerio, ["CIO.push.image"]),
        (
            "31-clevertap-carousel.json", .fcm,
            (1...5).map { "message.data.pt_img\($0)" }
        ),
        ("32-braze-story.json", .braze, ["ab_c0_i", "ab_c1_i", "ab_c2_i"]),
    ])
    func detectsTheVendorByShape(file: String, vendor: Vendor, paths: [String]) throws {
        let payload = try sample(file)
        #expect(Vendor.detect(payload) == vendor)
        #expect(vendor.slots(in: payload, extraKeys: [], profile: .ios).map(\.target.description) == paths)
        let detected = Vendor.detected(in: payload, extraKeys: [], profile: .android)
        #expect(detected.vendor == vendor)
        #expect(detected.slots.map(\.target.description) == paths)
        #expect(
            detected.slots.map(\.platform.id)
                == vendor.slots(in: payload, extraKeys: [], profile: .android).map(\.platform.id))
    }

    @Test func fcmPartsTakeTheCommonImageAndTheirOwnPlatform() throws {
        let slots = Vendor.fcm.slots(in: try sample("22-fcm-message.json"), extraKeys: [], profile: .ios)
        #expect(slots.map(\.platform.id) == ["ios", "android"])
        #expect(slots.allSatisfy { $0.source.description == "message.notification.image" })
        // A missing own image is never removed on rejection (the common one serves other parts).
        #expect(slots.allSatisfy { $0.removals.isEmpty })
        let huawei = Vendor.fcm.slots(in: try sample("22-fcm-message.json"), extraKeys: [], profile: .huawei)
        #expect(huawei.map(\.platform.id) == ["ios", "huawei"])
    }

    @Test func airshipArraysAndOptionsAreRead() throws {
        let media = JSONObject([
            (
                "urls",
                .array([
                    .object(JSONObject([("url", .string("https://a.example/1.jpg")), ("url_id", .string("one"))])),
                    .object(JSONObject([("url", .string("https://a.example/2.jpg")), ("url_id", .string("two"))])),
                ])
            ),
            (
                "options",
                .object(
                    JSONObject([
                        (
                            "crop",
                            .object(
                                JSONObject([
                                    ("x", .number("0.25")), ("y", .number("0")),
                                    ("width", .number("0.5")), ("height", .number("1")),
                                ]))
                        ),
                        ("time", .number("2.5")), ("hidden", .bool(true)),
                    ]))
            ),
        ])
        let slots = Vendor.airship.slots(
            in: payload([(Vendor.airshipKey, .object(media))]), extraKeys: [], profile: .ios)
        // A key with dots is quoted in the dotted form.
        #expect(
            slots.map(\.target.description) == [
                #""com.urbanairship.media_attachment".urls[0].url"#,
                #""com.urbanairship.media_attachment".urls[1].url"#,
            ])
        #expect(slots[1].removals.map(\.description) == [#""com.urbanairship.media_attachment".urls[1]"#])
        #expect(
            slots[0].givenHints
                == ThumbnailHints(clip: ClipRect(x: 0.25, y: 0, width: 0.5, height: 1), hidden: true, time: 2.5))
    }

    @Test func forcedVendorWithoutItsKeysIsSkippedNamingThem() async throws {
        let result = try await pipeline { $0.vendor = .braze }.process(try sample("01-photo-exif.json"))
        #expect(result.outcome.status == .skipped && result.outcome.reason == "no_media")
        #expect(result.outcome.message?.contains("ab.att.url") == true)
        #expect(result.outcome.vendor == "braze")
    }

    // MARK: every vendor sample comes back in its own shape

    @Test func fcmMessageGetsOneVariantPerPlatform() async throws {
        let input = try sample("22-fcm-message.json")
        let result = try await pipeline().process(input, context: PayloadContext(label: "22-fcm-message.json"))
        let outcome = result.outcome
        #expect(outcome.vendor == "fcm" && outcome.status == .processed)
        let media = try #require(outcome.media)
        #expect(media.map(\.platform) == ["ios", "android"] && media.allSatisfy { $0.status == .processed })
        let ios = try #require(string(result.payload, "message", "apns", "fcm_options", "image"))
        let android = try #require(string(result.payload, "message", "android", "notification", "image"))
        #expect(ios != android)
        // iOS: WebP → JPEG at its own size (1200×800); Android: 2:1 JPEG ≤ 1 MB.
        let iosHeader = try stored(ios, is: .jpeg)
        #expect(iosHeader.width == 1200 && iosHeader.height == 800)
        let androidHeader = try stored(android, is: .jpeg)
        #expect(androidHeader.width == 2 * androidHeader.height && androidHeader.width <= 1440)
        #expect(try #require(media[1].attachment).bytes <= 1_000_000)
        // The common image, the data and the other fields are kept; the APNs part can run the NSE.
        #expect(string(result.payload, "message", "notification", "image") == "media/banner.webp")
        #expect(
            result.payload[path: JSONPath(keys: "message", "data")] == input[path: JSONPath(keys: "message", "data")])
        #expect(
            result.payload[path: JSONPath(keys: "message", "apns", "payload", "aps", "mutable-content")] == .number("1")
        )
        #expect(
            result.payload[path: JSONPath(keys: "message", "apns", "payload", "aps", "sound")] == .string("default"))
        let descriptor = try #require(
            result.payload[path: JSONPath(keys: "message", "apns", "payload", "pushmedia")]?.objectValue)
        #expect(descriptor["type"] == .string("public.jpeg"))
        #expect(result.payload["pushmedia"] == nil)
        #expect(result.bytes.count <= PayloadRewriter.apnsLimit)
    }

    @Test func fcmWebPushGetsA2To1ImageAndAnIcon() async throws {
        let result = try await pipeline().process(try sample("23-fcm-webpush.json"))
        let entry = try #require(result.outcome.media?.first)
        #expect(entry.platform == "web" && entry.status == .processed)
        let image = try #require(string(result.payload, "message", "webpush", "notification", "image"))
        let header = try stored(image, is: .jpeg)
        #expect(header.width == 1440 && header.height == 720)
        let icon = try #require(string(result.payload, "message", "webpush", "notification", "icon"))
        let iconHeader = try stored(icon, is: .jpeg)
        #expect(iconHeader.width == 192 && iconHeader.height == 192)
        #expect(entry.icon?.url == icon)
        // No APNs part: no aps, no descriptor added.
        #expect(result.payload[path: JSONPath(keys: "message", "apns")] == nil)
    }

    @Test func fcmAPNsPayloadHEICBecomesJPEG() async throws {
        let result = try await pipeline().process(try sample("24-fcm-apns.json"))
        #expect(result.outcome.vendor == "fcm" && result.outcome.status == .processed)
        _ = try stored(string(result.payload, "fcm_options", "image"), is: .jpeg)
        #expect(result.payload["gcm.message_id"] == .string("1234567890"))
        #expect(result.descriptor?["type"] == .string("public.jpeg"))
    }

    @Test func oneSignalProcessesEveryAttachment() async throws {
        let result = try await pipeline().process(try sample("25-onesignal.json"))
        let media = try #require(result.outcome.media)
        #expect(media.map(\.path) == ["att.id1", "att.id2"])
        #expect(media.map(\.status) == [.processed, .passthrough])
        _ = try stored(string(result.payload, "att", "id1"), is: .jpeg)
        _ = try stored(string(result.payload, "att", "id2"), is: .png)
        let items = try #require(result.descriptor?["items"]?.arrayValue)
        #expect(items.count == 2)
        #expect(items[1].objectValue?["type"] == .string("public.png"))
        #expect(result.payload["custom"] == (try sample("25-onesignal.json"))["custom"])
    }

    @Test func airshipKeepsItsOptionsAndThumbnailID() async throws {
        let input = try sample("26-airship.json")
        let result = try await pipeline { $0.thumbnailAspect = 1 }.process(input)
        let media = try #require(result.payload[Vendor.airshipKey]?.objectValue)
        let url = try #require(media["url"]?.arrayValue?.first?.stringValue)
        _ = try stored(url, is: .jpeg)
        #expect(media["thumbnail_id"] == .string("hero"))
        #expect(media["options"] == input[Vendor.airshipKey]?.objectValue?["options"])
        #expect(media["content"] == input[Vendor.airshipKey]?.objectValue?["content"])
        // The given crop wins over the computed one.
        let hints = try #require(result.outcome.media?.first?.hints)
        #expect(hints.clip == ClipRect(x: 0.1, y: 0, width: 0.8, height: 1) && hints.hidden == false)
        #expect(result.descriptor?["clip"]?.objectValue?["Width"] == .number("0.8"))
    }

    @Test func brazeTypeComesFromTheBytes() async throws {
        let result = try await pipeline().process(try sample("27-braze.json"))
        #expect(result.outcome.vendor == "braze" && result.outcome.status == .passthrough)
        _ = try stored(string(result.payload, "ab", "att", "url"), is: .jpeg)
        #expect(string(result.payload, "ab", "att", "type") == "jpg")
        #expect(string(result.payload, "ab", "c") == "campaign-5521")
    }

    @Test func cleverTapMediaTypeComesFromTheBytes() async throws {
        let result = try await pipeline().process(try sample("28-clevertap.json"))
        #expect(result.outcome.status == .passthrough)
        _ = try stored(string(result.payload, "ct_mediaUrl"), is: .gif)
        #expect(string(result.payload, "ct_mediaType") == "gif")
        // An animation: the frame with the most detail is suggested as the thumbnail.
        let frame = try #require(result.outcome.media?.first?.hints?.frame)
        #expect((0..<12).contains(frame))
        #expect(result.descriptor?["frame"] == .number(String(frame)))
    }

    @Test func iterableAndCustomerIOAreRewrittenInPlace() async throws {
        let pipeline = try pipeline()
        let iterable = await pipeline.process(try sample("29-iterable.json"))
        #expect(iterable.outcome.status == .processed)
        _ = try stored(string(iterable.payload, "itbl", "attachment-url"), is: .jpeg)
        #expect(iterable.payload[path: JSONPath(keys: "itbl", "templateId")] == .number("9931"))
        let customerIO = await pipeline.process(try sample("30-customerio.json"))
        #expect(customerIO.outcome.status == .processed)
        _ = try stored(string(customerIO.payload, "CIO", "push", "image"), is: .jpeg)
        #expect(customerIO.payload["aps"]?.objectValue?["mutable-content"] == .number("1"))
    }

    @Test func rejectedBrazeAttachmentIsRemovedWhole() async throws {
        let input = payload([
            (
                "ab",
                .object(
                    JSONObject([
                        (
                            "att",
                            .object(JSONObject([("url", .string("30-customerio.json")), ("type", .string("mp4"))]))
                        ),
                        ("c", .string("x")),
                    ]))
            )
        ])
        let result = try await pipeline().process(input)
        #expect(result.outcome.status == .rejected && result.outcome.reason == "unsupported_type")
        #expect(result.payload["ab"] == .object(JSONObject([("c", .string("x"))])))
    }

    @Test func severalAttachmentsStayWithinTheLimit() async throws {
        // Long custom data leaves little room: URLs must fit or the references are rejected.
        let att = JSONValue.object(
            JSONObject([("a", .string("media/logo-alpha.png")), ("b", .string("media/spinner.gif"))]))
        let bare = JSONValue.object(payload([("att", att), ("note", .string(""))])).compactByteCount
        let filler = String(repeating: "x", count: PayloadRewriter.apnsLimit - 100 - bare)
        let input = payload([("att", att), ("note", .string(filler))])
        let result = try await pipeline { $0.baseURL = "https://cdn.example.com/" + String(repeating: "m", count: 60) }
            .process(input)
        #expect(result.bytes.count <= PayloadRewriter.apnsLimit)
        #expect(result.payload["note"] == .string(filler))
        #expect(result.outcome.media?.allSatisfy { $0.status == .rejected && $0.reason == "payload_too_large" } == true)
        #expect(result.payload["att"] == nil)
    }

    // MARK: profiles

    @Test func huaweiProfileMakesA2To1JPEGUnder512KB() async throws {
        let result = try await pipeline { $0.profile = .huawei }.process(try sample("01-photo-exif.json"))
        let attachment = try #require(result.outcome.attachment)
        #expect(result.outcome.media?.first?.platform == "huawei")
        #expect(attachment.width == 1024 && attachment.height == 512 && attachment.bytes < 512_000)
        _ = try stored(attachment.url, is: .jpeg)
        // Not an iOS attachment: no thumbnail, no mutable-content change needed, no descriptor.
        #expect(result.outcome.thumbnail == nil)
        #expect(result.descriptor == nil)
    }

    @Test func androidProfileFlattensNothingButRejectsAudio() async throws {
        let pipeline = try pipeline { $0.profile = .android }
        let logo = await pipeline.process(try sample("02-logo-alpha.json"))
        let attachment = try #require(logo.outcome.attachment)
        #expect(attachment.width == 2 * (attachment.height ?? 0))
        _ = try stored(attachment.url, is: .png)
        let audio = await pipeline.process(try sample("12-mp3.json"))
        #expect(audio.outcome.status == .rejected && audio.outcome.reason == "unsupported_type")
        #expect(audio.outcome.message?.contains("show no audio") == true)
    }

    @Test func androidPassesThroughA2To1JPEGUnder1MB() async throws {
        var config = testConfig(store: store)
        config.profile = .android
        config.mediaRoot = samplesDirectory
        let first = try await Pipeline(config: config).process(try sample("01-photo-exif.json"))
        let made = try #require(first.outcome.attachment)
        // Feed the 2:1 result back in: it already fits, so it passes through byte for byte.
        let again = payload([
            ("media_url", .string(made.url.replacingOccurrences(of: config.baseURL, with: "file://" + store.path)))
        ])
        config.mediaRoot = store.path
        let second = try await Pipeline(config: config).process(again)
        #expect(second.outcome.status == .passthrough)
        #expect(second.outcome.attachment?.url == made.url)
    }

    // MARK: hints

    @Test func clippingRectangleForARequestedAspect() async throws {
        let pipeline = try pipeline {
            $0.thumbnailAspect = 1
            $0.thumbnailHidden = true
        }
        let result = await pipeline.process(try sample("03-webp.json"))
        let hints = try #require(result.outcome.media?.first?.hints)
        let clip = try #require(hints.clip)
        // 1200×800 image, square clip: 800/1200 of the width, the whole height.
        #expect(abs(clip.width - 2.0 / 3.0) < 0.01 && clip.height == 1 && clip.y == 0)
        #expect(clip.x >= 0 && clip.x + clip.width <= 1.0001)
        #expect(hints.hidden == true)
        let descriptor = try #require(result.descriptor)
        #expect(descriptor["hidden"] == .bool(true))
        let rect = try #require(descriptor["clip"]?.objectValue)
        #expect(rect.keys == ["X", "Y", "Width", "Height"])
        // Centre crop puts the same square in the middle.
        let centred = try await self.pipeline {
            $0.thumbnailAspect = 1
            $0.crop = .centre
        }.process(try sample("03-webp.json"))
        let middle = try #require(centred.outcome.media?.first?.hints?.clip)
        #expect(abs(middle.x - 1.0 / 6.0) < 0.01)
    }
}
