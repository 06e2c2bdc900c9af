import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// The whole pipeline with the real libraries: media served by a real origin on 127.0.0.1.
@Suite("Pipeline")
struct PipelineTests {
    let origin: TestOrigin
    let store = TemporaryDirectory()

    init() throws {
        origin = try TestOrigin()
    }

    func pipeline(
        budget: Duration = .seconds(10), clock: WallClock = .system,
        _ adjust: (inout PushMediaConfig) -> Void = { _ in }
    ) throws -> Pipeline {
        var config = testConfig(store: store, budget: budget)
        adjust(&config)
        return try Pipeline(config: config, clock: clock)
    }

    /// Serves `sample` at `path` and processes a payload that points at it.
    func run(
        _ sample: String, at path: String, contentType: String? = "application/octet-stream",
        pipeline: Pipeline? = nil, key: String = "media_url"
    ) async throws -> PipelineResult {
        origin.route(path, .file(body: try sampleMedia(sample), contentType: contentType))
        let pipeline = try pipeline ?? self.pipeline()
        return await pipeline.process(payload([(key, .string(origin.url(path)))]))
    }

    /// The stored file behind an attachment URL.
    func storedPath(_ url: String?) throws -> String {
        let name = try #require(url?.split(separator: "/").last.map(String.init))
        #expect(MediaStore.isValidName(name))
        return store.file(name)
    }

    func header(ofStored url: String?) throws -> ImageHeader {
        try Transcoder(config: PushMediaConfig()).header(path: try storedPath(url))
    }

    func expectClean() {
        #expect(leftovers(store).isEmpty)
        #expect(nonFinalStoreFiles(store).isEmpty)
    }

    /// An FCM message's Android and iOS parts name one image: two jobs (one per platform), one
    /// download, and no work file left behind.
    @Test func platformVariantsShareOneDownload() async throws {
        // A download is shared only while it runs: the origin answers late, so that the second
        // job's fetch starts while the first one's is still waiting (a loopback download of the
        // bare file would be over in milliseconds).
        origin.route(
            "/banner",
            .delayed(
                underSanitizer ? .seconds(3) : .seconds(1), body: try sampleMedia("banner.webp"),
                contentType: "image/webp"))
        let message = try JSONValue.parse(
            Array(
                """
                {"message": {"token": "device-1", "notification": {"title": "Sale", "image": "\(origin.url("/banner"))"},
                 "android": {"notification": {"channel_id": "deals"}}, "apns": {"payload": {"aps": {}}}}}
                """.utf8))
        let result = try await pipeline().process(
            try #require(message.objectValue), context: PayloadContext(vendor: .fcm))
        let media = try #require(result.outcome.media)
        #expect(media.count == 2 && media.allSatisfy { $0.status == .processed }, "\(media)")
        #expect(origin.hits("/banner") == 1)
        expectClean()
    }

    // MARK: processed and passthrough

    @Test func largeJPEGIsRotatedByEXIFAndShrunk() async throws {
        let result = try await run("photo-exif.jpg", at: "/photo", contentType: "text/plain")
        let outcome = result.outcome
        #expect(outcome.status == .processed)
        let attachment = try #require(outcome.attachment)
        // Stored 4032×3024 landscape with orientation 6: upright it is portrait, long edge 2048.
        #expect(attachment.width == 1536 && attachment.height == 2048)
        #expect(attachment.mime == "image/jpeg")
        #expect(attachment.url.hasPrefix("https://cdn.example.com/m/") && attachment.url.hasSuffix(".jpg"))
        let stored = try header(ofStored: attachment.url)
        #expect(stored.width == 1536 && stored.height == 2048 && stored.orientation == 1)
        #expect(
            Sniffer.sniff(Array(try Data(contentsOf: URL(fileURLWithPath: try storedPath(attachment.url))))[...]).format
                == .jpeg)
        let thumb = try #require(outcome.thumbnail)
        #expect(max(thumb.width ?? 0, thumb.height ?? 0) == 512)
        #expect(result.payload["media_url"] == .string(attachment.url))
        let descriptor = try #require(result.descriptor)
        #expect(descriptor["status"] == .string("processed"))
        #expect(descriptor["type"] == .string("public.jpeg"))
        #expect(descriptor["width"] == .number("1536"))
        #expect(descriptor["thumb"] == .string(thumb.url))
        #expect(result.payload["aps"]?.objectValue?["alert"] == payload([])["aps"]?.objectValue?["alert"])
        #expect(outcome.sourceMIME == "image/jpeg")
        #expect(outcome.timingsMs.total > 0 && outcome.timingsMs.fetch > 0)
        expectClean()
    }

    @Test func alphaStaysPNGWhenTranscoded() async throws {
        let pipeline = try pipeline { $0.longEdge = 400 }
        let outcome = try await run("logo-alpha.png", at: "/logo", pipeline: pipeline).outcome
        #expect(outcome.status == .processed)
        #expect(outcome.attachment?.mime == "image/png")
        #expect(outcome.attachment?.width == 400 && outcome.attachment?.height == 300)
        #expect(try header(ofStored: outcome.attachment?.url).hasAlpha)
        #expect(outcome.thumbnail?.mime == "image/jpeg")
    }

    @Test func compliantImagesPassThroughByteForByte() async throws {
        let outcome = try await run("logo-alpha.png", at: "/logo-ok").outcome
        #expect(outcome.status == .passthrough)
        let stored = try Data(contentsOf: URL(fileURLWithPath: try storedPath(outcome.attachment?.url)))
        #expect(Array(stored) == (try sampleMedia("logo-alpha.png")))
    }

    @Test func animatedGIFStaysAnimated() async throws {
        let passthrough = try await run("spinner.gif", at: "/spin.gif").outcome
        #expect(passthrough.status == .passthrough)
        #expect(passthrough.attachment?.mime == "image/gif")
        let shrunk = try await run("spinner.gif", at: "/spin-small", pipeline: try pipeline { $0.longEdge = 100 })
            .outcome
        #expect(shrunk.status == .processed)
        #expect(shrunk.attachment?.mime == "image/gif")
        #expect(shrunk.attachment?.width == 100)
        #expect(try header(ofStored: shrunk.attachment?.url).frames == 12)
    }

    @Test func animationOverTheFrameCapKeepsTheFirstFrame() async throws {
        let outcome = try await run("spinner.gif", at: "/spin-capped", pipeline: try pipeline { $0.maxFrames = 5 })
            .outcome
        #expect(outcome.status == .processed)
        #expect(try header(ofStored: outcome.attachment?.url).frames == 1)
    }

    @Test(
        "formats iOS does not show become JPEG",
        arguments: ["banner.webp", "portrait.heic", "sunset.avif", "scan.tiff", "diagram.bmp"])
    func convertsToJPEG(_ sample: String) async throws {
        let outcome = try await run(sample, at: "/img/\(sample)").outcome
        #expect(outcome.status == .processed, "\(outcome)")
        #expect(outcome.attachment?.mime == "image/jpeg")
        #expect(outcome.attachment?.url.hasSuffix(".jpg") == true)
        #expect(try header(ofStored: outcome.attachment?.url).loader == "jpegload")
        expectClean()
    }

    @Test func thumbnailsCanBeTurnedOffWithoutSkippingTheDecodeCheck() async throws {
        let pipeline = try pipeline { $0.thumbnailEdge = 0 }
        let photo = try await run("photo-exif.jpg", at: "/no-thumb", pipeline: pipeline)
        #expect(photo.outcome.status == .processed)
        #expect(photo.outcome.thumbnail == nil)
        #expect(photo.descriptor?["thumb"] == nil)
        let truncated = try await run("truncated.jpg", at: "/no-thumb-truncated", pipeline: pipeline)
        #expect(truncated.outcome.reason == "decode_failed")
        // The message names the URL, not the store's work file that libvips read.
        let message = try #require(truncated.outcome.message)
        #expect(message.contains("/no-thumb-truncated"), "\(message)")
        #expect(!message.contains(store.path) && !message.contains(".incoming"), "\(message)")
    }

    @Test func thumbnailsOfSlowDecodersAreMadeFromTheAttachment() async throws {
        let outcome = try await run("scan.tiff", at: "/scan", pipeline: try pipeline { $0.longEdge = 400 }).outcome
        #expect(outcome.status == .processed)
        #expect(outcome.attachment?.width == 400)
        let thumb = try #require(outcome.thumbnail)
        #expect(thumb.width == 400 && thumb.mime == "image/jpeg")  // never enlarged past the attachment
    }

    @Test func aPNGNamedJPGIsStoredAsPNG() async throws {
        let outcome = try await run("really-a-png.jpg", at: "/really-a-png.jpg", contentType: "image/jpeg").outcome
        #expect(outcome.status == .passthrough)
        #expect(outcome.attachment?.url.hasSuffix(".png") == true)
        #expect(outcome.attachment?.mime == "image/png")
    }

    @Test(
        "compliant audio and video pass through",
        arguments: [
            ("chime.mp3", "audio/mpeg", ".mp3"), ("ping.m4a", "audio/mp4", ".m4a"),
            ("bell.wav", "audio/wav", ".wav"), ("clip.mp4", "video/mp4", ".mp4"),
        ])
    func audioAndVideoPassThrough(_ sample: String, _ mime: String, _ ext: String) async throws {
        let result = try await run(sample, at: "/av/\(sample)")
        #expect(result.outcome.status == .passthrough)
        #expect(result.outcome.attachment?.mime == mime)
        #expect(result.outcome.attachment?.url.hasSuffix(ext) == true)
        if mime.hasPrefix("video/") {
            // A video's poster frame is its thumbnail (the descriptor's `thumb`).
            let thumbnail = try #require(result.outcome.thumbnail)
            #expect(thumbnail.mime == "image/jpeg" && thumbnail.width == 320 && thumbnail.height == 240)
            #expect(try header(ofStored: thumbnail.url).width == 320)
            #expect(result.descriptor?["thumb"] == .string(thumbnail.url))
        } else {
            #expect(result.outcome.thumbnail == nil)
        }
    }

    // MARK: rejected

    @Test func aWebMClipIsTranscodedForIOS() async throws {
        let result = try await run("clip.webm", at: "/clip.mp4", contentType: "video/mp4")
        let outcome = result.outcome
        #expect(outcome.status == .processed, "\(outcome.message ?? "")")
        #expect(outcome.sourceMIME == "video/webm")
        let attachment = try #require(outcome.attachment)
        #expect(attachment.mime == "video/mp4" && attachment.url.hasSuffix(".mp4"))
        let info = try VideoFrames(maxPixels: 50_000_000).probe(
            try storedPath(attachment.url), deadline: .now + .seconds(10))
        #expect(info.videoCodec == "h264" && info.width == 320 && info.height == 240)
        #expect(abs((info.duration ?? 0) - 2) < 0.3)
        // faststart: the index (moov) comes before the media data (mdat).
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try storedPath(attachment.url)))
        let moov = try #require(bytes.range(of: Data("moov".utf8)))
        let mdat = try #require(bytes.range(of: Data("mdat".utf8)))
        #expect(moov.lowerBound < mdat.lowerBound)
        #expect(outcome.thumbnail?.mime == "image/jpeg")
        #expect(result.payload["media_url"] == .string(attachment.url))
        expectClean()
    }

    @Test func audioOnAPlatformWithoutAudioIsRejectedWithItsReason() async throws {
        origin.route("/chime.mp3", .file(body: try sampleMedia("chime.mp3"), contentType: "audio/mpeg"))
        let outcome = await (try pipeline { $0.profile = .android }).process(
            payload([("media_url", .string(origin.url("/chime.mp3")))])
        ).outcome
        #expect(outcome.status == .rejected && outcome.reason == "unsupported_type")
        #expect(outcome.message?.contains("show no audio") == true)
    }

    @Test func httpErrorsAreRejectedAndOnRejectKeepKeepsTheURL() async throws {
        origin.route("/missing.jpg", .status(404, body: "not found"))
        let url = origin.url("/missing.jpg")
        let dropped = await (try pipeline()).process(payload([("image_url", .string(url))]))
        #expect(dropped.outcome.reason == "http_404")
        #expect(dropped.payload["image_url"] == nil)
        #expect(dropped.outcome.message?.contains(url) == true)
        let kept = await (try pipeline { $0.onReject = .keep }).process(payload([("image_url", .string(url))]))
        #expect(kept.outcome.reason == "http_404")
        #expect(kept.payload["image_url"] == .string(url))
    }

    @Test func loopbackIsDeniedWithoutAllowPrivateNetworks() async throws {
        origin.route("/internal.jpg", .file(body: try sampleMedia("no-extension"), contentType: "image/jpeg"))
        let outcome = await (try pipeline { $0.allowPrivateNetworks = false }).process(
            payload([("media_url", .string(origin.url("/internal.jpg")))])
        ).outcome
        #expect(outcome.status == .rejected)
        #expect(outcome.reason == "blocked_address")
        #expect(origin.hits("/internal.jpg") == 0)
        expectClean()
    }

    @Test func imagesOverThePixelCapAreRejectedFromTheHeader() async throws {
        let outcome = try await run(
            "photo-exif.jpg", at: "/many-pixels.jpg", pipeline: try pipeline { $0.maxPixels = 1_000_000 }
        ).outcome
        #expect(outcome.reason == "too_many_pixels")
        #expect(outcome.attachment == nil)
        expectClean()
    }

    @Test func slowTransfersTimeOut() async throws {
        origin.route("/slow.jpg", .drip(contentType: "image/jpeg", bytesPerSecond: 1, total: 100))
        let outcome = await (try pipeline { $0.lowSpeedTime = .seconds(1) }).process(
            payload([("media_url", .string(origin.url("/slow.jpg")))])
        ).outcome
        #expect(outcome.reason == "timeout")
        expectClean()
    }

    @Test func badReferencesAreRejectedWithoutFetching() async throws {
        let pipeline = try pipeline()
        let number = await pipeline.process(payload([("media_url", .number("42"))])).outcome
        #expect(number.reason == "invalid_media_reference")
        let ftp = await pipeline.process(payload([("media_url", .string("ftp://example.com/a.jpg"))])).outcome
        #expect(ftp.reason == "unsupported_scheme")
        let local = await pipeline.process(payload([("media_url", .string("media/photo.jpg"))])).outcome
        #expect(local.reason == "invalid_url")
        let long = await pipeline.process(
            payload([("media_url", .string("https://example.com/" + String(repeating: "a", count: 10_000)))])
        ).outcome
        #expect(long.reason == "payload_too_large")  // a 10,000-character URL cannot fit in an APNs payload
    }

    @Test func payloadsAlreadyOverTheLimitAreRejectedWithTheirText() async throws {
        let body = String(repeating: "Long text ", count: 420)
        var input = payload([("media_url", .string(origin.url("/never.jpg")))])
        input["aps"] = .object(
            JSONObject([("alert", .object(JSONObject([("body", .string(body))]))), ("mutable-content", .number("1"))]))
        let result = await (try pipeline()).process(input)
        #expect(result.outcome.status == .rejected)
        #expect(result.outcome.reason == "payload_too_large")
        #expect(result.payload["aps"]?.objectValue?["alert"]?.objectValue?["body"] == .string(body))
        #expect(origin.hits("/never.jpg") == 0)
    }

    @Test func rewrittenPayloadsStayWithinFourKilobytes() async throws {
        origin.route("/near.jpg", .file(body: try sampleMedia("no-extension"), contentType: "image/jpeg"))
        let input = payload([
            ("media_url", .string(origin.url("/near.jpg"))), ("pad", .string(String(repeating: "ü", count: 1_850))),
        ])
        #expect(JSONValue.object(input).serialized().count < 4096)
        let result = await (try pipeline()).process(input)
        #expect(result.outcome.status == .passthrough)
        #expect(result.bytes.count <= 4096)
        #expect(result.outcome.payloadBytes == result.bytes.count)
        #expect(result.payload["pad"] == input["pad"])
        #expect(result.outcome.warnings?.first?.contains("dropped") == true)
    }

    // MARK: skipped

    @Test func payloadsWithoutMediaOrAlertAreSkippedUnchanged() async throws {
        let pipeline = try pipeline()
        let plain = payload([("deep_link", .string("app://x"))])
        let noMedia = await pipeline.process(plain)
        #expect(noMedia.outcome.status == .skipped && noMedia.outcome.reason == "no_media")
        #expect(noMedia.payload == plain)
        let silent = payload([("media_url", .string(origin.url("/x.jpg")))], alert: false)
        let noAlert = await pipeline.process(silent)
        #expect(noAlert.outcome.status == .skipped && noAlert.outcome.reason == "no_alert")
        #expect(noAlert.outcome.warnings?.isEmpty == false)
        #expect(noAlert.payload == silent)
        #expect(origin.hits("/x.jpg") == 0)
    }

    @Test func invalidJSONIsATypedError() async throws {
        let pipeline = try pipeline()
        await #expect(throws: PayloadError.self) { try await pipeline.process(Array("{\"aps\": ".utf8)) }
        await #expect(throws: PayloadError.self) { try await pipeline.process(Array("[1, 2]".utf8)) }
    }
}
