import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// Multi-image templates (CleverTap's carousels, GIFs and iOS slider, Braze's push stories) in
/// their vendors' documented shapes, through the whole pipeline, against a real origin on
/// 127.0.0.1 and the real libraries.
@Suite("Templates")
struct TemplateTests {
    let origin: TestOrigin
    let store = TemporaryDirectory()

    init() throws {
        origin = try TestOrigin()
    }

    func pipeline(budget: Duration = .seconds(20), _ adjust: (inout PushMediaConfig) -> Void = { _ in }) throws
        -> Pipeline
    {
        var config = testConfig(store: store, budget: budget)
        adjust(&config)
        return try Pipeline(config: config)
    }

    /// Serves `sample` at each of `paths`, optionally late.
    func serve(_ sample: String, at paths: [String], delay: Duration? = nil) throws {
        let body = try sampleMedia(sample)
        for path in paths {
            origin.route(
                path,
                delay.map { .delayed($0, body: body, contentType: "image/jpeg") }
                    ?? .file(body: body, contentType: "application/octet-stream"))
        }
    }

    func process(_ json: String, _ pipeline: Pipeline? = nil, vendor: Vendor? = nil) async throws -> PipelineResult {
        try await (pipeline ?? self.pipeline()).process(Array(json.utf8), context: PayloadContext(vendor: vendor))
    }

    func stored(_ url: String?) throws -> (header: ImageHeader, bytes: Int, format: MediaFormat) {
        let name = try #require(url?.split(separator: "/").last.map(String.init))
        #expect(MediaStore.isValidName(name))
        let data = Array(try Data(contentsOf: URL(fileURLWithPath: store.file(name))))
        let header = try Transcoder(config: PushMediaConfig()).header(path: store.file(name))
        return (header, data.count, Sniffer.sniff(data[...]).format)
    }

    /// The media outcomes of pages, by path.
    func pages(_ result: PipelineResult) -> [MediaOutcome] {
        (result.outcome.media ?? []).filter { $0.template?.page != nil }
    }

    /// A CleverTap auto carousel as an FCM HTTP v1 data message: five large photos, each made
    /// 3:2 within 86 KB, together under Android's 5,000,000 decoded bytes; the same URL twice is
    /// fetched and stored once; every value stays a string.
    @Test func cleverTapCarouselFitsAndroidsBitmapLimit() async throws {
        try serve("photo-exif.jpg", at: ["/c1", "/c2", "/c3", "/c4"])
        let json = """
            {"message": {"token": "device-1", "data": {"pt_id": "pt_carousel", "pt_title": "Spring", "pt_msg": "New in",
             "pt_dl1": "app://sale", "pt_img1": "\(origin.url("/c1"))", "pt_img1_alt_text": "one",
             "pt_img2": "\(origin.url("/c2"))", "pt_img3": "\(origin.url("/c3"))", "pt_img4": "\(origin.url("/c4"))",
             "pt_img5": "\(origin.url("/c1"))"}}}
            """
        let result = try await process(json)
        let media = pages(result)
        #expect(media.count == 5, "\(result.outcome)")
        var decoded: Int64 = 0
        var names = Set<String>()
        for page in media {
            #expect(page.status == .processed, "\(page)")
            #expect(page.platform == "android")
            let attachment = try #require(page.attachment)
            names.insert(attachment.url)
            let file = try stored(attachment.url)
            let (width, height) = (file.header.width, file.header.height)
            #expect(abs(Double(width) / Double(height) - 1.5) < 0.01, "\(width)×\(height) is not 3:2")
            #expect(file.bytes <= 86_000)
            #expect(file.format == .jpeg)
            #expect(page.template?.name == "pt_carousel" && page.template?.maxBytes == 86_000)
            #expect(page.template?.decodedBytes == Int64(width * height * 4))
            decoded += Int64(width * height * 4)
        }
        #expect(decoded < Templates.androidBitmapLimit, "\(decoded) decoded bytes")
        // Not shrunk further than the limit asks: the five together use most of it.
        #expect(decoded > Templates.androidBitmapLimit * 9 / 10, "\(decoded) decoded bytes")
        // The four sources are the same bytes: one stored file, named by its SHA-256.
        #expect(["/c1", "/c2", "/c3", "/c4"].allSatisfy { origin.hits($0) == 1 } && names.count == 1)
        let data = try #require(result.payload[path: JSONPath(keys: "message", "data")]?.objectValue)
        #expect(data.members.allSatisfy { $0.value.stringValue != nil })
        #expect(data["pt_img1"] == data["pt_img5"] && data["pt_title"] == .string("Spring"))
        #expect(data["pt_img1_alt_text"] == .string("one") && data["pt_dl1"] == .string("app://sale"))

        // A second push of the campaign: every image from the cache, no new fetch.
        let again = try await process(json)
        #expect(pages(again).allSatisfy { $0.cacheHit == true && $0.status == .processed })
        #expect(origin.hits("/c1") == 1 && origin.hits("/c2") == 1)
    }

    /// The images of one notification are fetched at once under its one budget: four slow
    /// images (3 s each) fit a budget a one-after-another fetch would overrun by half.
    @Test func imagesAreFetchedInParallel() async throws {
        let paths = ["/s1", "/s2", "/s3", "/s4"]
        try serve("really-a-png.jpg", at: paths, delay: .seconds(3))
        let items = paths.enumerated().map { "\"pt_img\($0 + 1)\": \"\(origin.url($1))\"" }.joined(separator: ", ")
        let result = try await process(
            "{\"pt_id\": \"pt_manual_carousel\", \"pt_title\": \"t\", \(items)}", try pipeline(budget: .seconds(8)))
        #expect(pages(result).count == 4)
        #expect(pages(result).allSatisfy { $0.status == .processed }, "\(result.outcome)")
        #expect(paths.allSatisfy { origin.hits($0) == 1 })
    }

    /// A failed image goes with its keys (alt text, deep link); with fewer than the 3 a carousel
    /// needs, the template falls back to pt_basic with the first image, as CleverTap's SDK does.
    @Test func failedImagesGoWithTheirKeysAndTheCarouselFallsBack() async throws {
        try serve("really-a-png.jpg", at: ["/ok1", "/ok2"])
        origin.route("/gone", .status(404, body: "no"))
        let result = try await process(
            """
            {"pt_id": "pt_manual_carousel", "pt_title": "t", "pt_msg": "m",
             "pt_img1": "\(origin.url("/ok1"))", "pt_dl1": "app://1",
             "pt_img2": "\(origin.url("/gone"))", "pt_img2_alt_text": "two", "pt_dl2": "app://2",
             "pt_img3": "\(origin.url("/ok2"))", "pt_dl3": "app://3"}
            """)
        let payload = result.payload
        #expect(payload["pt_img2"] == nil && payload["pt_img2_alt_text"] == nil && payload["pt_dl2"] == nil)
        #expect(payload["pt_dl1"] == .string("app://1") && payload["pt_dl3"] == .string("app://3"))
        #expect(payload["pt_id"] == .string("pt_basic"))
        #expect(
            payload["pt_big_img"] == payload["pt_img1"] && payload["pt_img1"]?.stringValue?.hasSuffix(".jpg") == true)
        #expect(payload["pt_title"] == .string("t") && payload["pt_msg"] == .string("m"))
        let warnings = (result.outcome.warnings ?? []).joined(separator: "\n")
        #expect(warnings.contains("pt_basic") && warnings.contains("pt_img2"), "\(warnings)")
    }

    /// `pt_json` is a JSON document in a string: its images are rewritten inside it, and it stays
    /// a string that parses; keys outside it are kept.
    @Test func ptJSONIsRewrittenInsideItsString() async throws {
        try serve("really-a-png.jpg", at: ["/j1", "/j2", "/j3"])
        let inner = """
            {"pt_id":"pt_carousel","pt_title":"Inside","pt_img1":"\(origin.url("/j1"))",\
            "pt_img2":"\(origin.url("/j2"))","pt_img3":"\(origin.url("/j3"))","pt_msg":"caf\\u00e9 \\"quoted\\""}
            """
        let outer = JSONObject([("pt_json", .string(inner)), ("wzrk_pn", .string("true"))])
        let result = try await process(String(decoding: JSONValue.object(outer).serialized(), as: UTF8.self))
        #expect(pages(result).count == 3 && pages(result).allSatisfy { $0.status == .processed }, "\(result.outcome)")
        #expect(result.payload["wzrk_pn"] == .string("true"))
        let text = try #require(result.payload["pt_json"]?.stringValue)
        let document = try #require(try JSONValue.parse(Array(text.utf8)).objectValue)
        #expect(document["pt_msg"] == .string("café \"quoted\"") && document["pt_title"] == .string("Inside"))
        for key in ["pt_img1", "pt_img2", "pt_img3"] {
            let url = try #require(document[key]?.stringValue)
            #expect(url.hasPrefix("https://cdn.example.com/m/") && url.hasSuffix(".jpg"))
            #expect(try stored(url).header.width == 600)
        }
        #expect(pages(result).first?.path == "pt_json(json).pt_img1")
    }

    /// A `pt_json` that is not JSON is left as it was, and the outcome says why.
    @Test func invalidPtJSONIsLeftAsItWas() async throws {
        try serve("really-a-png.jpg", at: ["/big"])
        let result = try await process(
            "{\"pt_id\": \"pt_basic\", \"pt_json\": \"{not json\", \"pt_big_img\": \"\(origin.url("/big"))\"}")
        #expect(result.payload["pt_json"] == .string("{not json"))
        #expect(result.outcome.media?.first?.status == .processed)
        #expect((result.outcome.warnings ?? []).contains { $0.contains("pt_json") && $0.contains("not valid JSON") })
    }

    /// An animated `pt_gif` stays an animated GIF whose URL ends in `.gif`, and its extracted
    /// frames' bitmaps count against the notification's limit.
    @Test func gifStaysAnAnimatedGIF() async throws {
        try serve("spinner.gif", at: ["/spin"])
        let result = try await process(
            "{\"pt_id\": \"pt_basic\", \"pt_gif\": \"\(origin.url("/spin"))\", \"pt_gif_frames\": \"12\"}")
        let gif = try #require(result.outcome.media?.first)
        #expect(gif.status == .processed || gif.status == .passthrough, "\(gif)")
        let url = try #require(gif.attachment?.url)
        #expect(url.hasSuffix(".gif") && result.payload["pt_gif"] == .string(url))
        let file = try stored(url)
        #expect(file.format == .gif && file.header.frames > 1)
        #expect(gif.template?.decodedBytes == Int64(file.header.width * file.header.height * 4 * 12))
        #expect((gif.template?.decodedBytes ?? .max) < Templates.androidBitmapLimit)
    }

    /// An animated `pt_gif` over its template's 500 KB keeps one frame in n, each shown as long
    /// as those it stands for, instead of becoming a still: still an animated GIF within the cap,
    /// and the outcome says how many frames were kept.
    @Test func aGIFOverItsCapKeepsFewerFrames() async throws {
        let work = TemporaryDirectory()
        let source = work.file("noisy.gif")
        // 40 frames of noise at 10 fps: about 2.5 MB, five times the cap.
        let made = try VideoFrames.run(
            VideoFrames.ffmpeg,
            [
                "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
                "testsrc2=size=300x200:rate=10:duration=4,noise=alls=80:allf=t", "-y", source,
            ], deadline: .now + .seconds(60), memoryLimit: 0)
        #expect(made.status == 0, "\(String(decoding: made.stderr, as: UTF8.self))")
        let body = Array(try Data(contentsOf: URL(fileURLWithPath: source)))
        #expect(Int64(body.count) > 2 * Templates.gif.maxBytes)
        origin.route("/noisy", .file(body: body, contentType: "image/gif"))
        let result = try await process("{\"pt_id\": \"pt_basic\", \"pt_gif\": \"\(origin.url("/noisy"))\"}")
        let gif = try #require(result.outcome.media?.first)
        #expect(gif.status == .processed, "\(gif)")
        let file = try stored(gif.attachment?.url)
        #expect(file.format == .gif && Int64(file.bytes) <= Templates.gif.maxBytes)
        #expect(file.header.frames >= 2 && file.header.frames < 40, "\(file.header.frames) frames")
        #expect(
            (result.outcome.warnings ?? []).contains { $0.contains("of its 40 frames are kept") },
            "\(result.outcome.warnings ?? [])")
        // Each kept frame lasts as long as the frames it stands for: the loop still takes 4 s.
        let name = try #require(gif.attachment?.url.split(separator: "/").last.map(String.init))
        let delays = try gifDelays(Array(try Data(contentsOf: URL(fileURLWithPath: store.file(name)))))
        #expect(delays.count == file.header.frames && delays.reduce(0, +) == 400, "\(delays)")
    }

    /// The delays, in hundredths of a second, of a GIF's frames: its blocks walked in order, the
    /// delay read from each graphic control extension.
    func gifDelays(_ bytes: [UInt8]) throws -> [Int] {
        func skipSubBlocks(_ index: inout Int) throws {
            while true {
                let length = Int(try #require(bytes.indices.contains(index) ? bytes[index] : nil))
                index += 1 + length
                if length == 0 { return }
            }
        }
        var index = 13
        if bytes[10] & 0x80 != 0 { index += 3 << (Int(bytes[10] & 7) + 1) }
        var delays: [Int] = []
        while bytes.indices.contains(index) {
            switch bytes[index] {
            case 0x21:
                if bytes[index + 1] == 0xF9 { delays.append(Int(bytes[index + 4]) | Int(bytes[index + 5]) << 8) }
                index += 2
                try skipSubBlocks(&index)
            case 0x2C:
                let flags = bytes[index + 9]
                index += 10
                if flags & 0x80 != 0 { index += 3 << (Int(flags & 7) + 1) }
                index += 1  // LZW minimum code size
                try skipSubBlocks(&index)
            case 0x3B:
                return delays
            default:
                Issue.record("no GIF block at \(index)")
                return delays
            }
        }
        return delays
    }

    /// More pages than a template takes: the extra ones are removed with their keys, unfetched,
    /// and named in the outcome.
    @Test func pagesPastTheMaximumAreRemoved() async throws {
        try serve("really-a-png.jpg", at: ["/p"])
        let images = (1...6).map { "\"pt_img\($0)\": \"\(origin.url("/p"))?n=\($0)\", \"pt_dl\($0)\": \"app://\($0)\"" }
        let result = try await process("{\"pt_id\": \"pt_five_icons\", \(images.joined(separator: ", "))}")
        #expect(result.payload["pt_img6"] == nil && result.payload["pt_dl6"] == nil)
        let sixth = try #require(result.outcome.media?.first { $0.path == "pt_img6" })
        #expect(sixth.status == .rejected && sixth.reason == "too_many_pages")
        #expect(sixth.message?.contains("at most 5") == true)
        for page in pages(result) where page.path != "pt_img6" {
            #expect(page.status == .processed)
            let file = try stored(page.attachment?.url)
            #expect(file.header.width == file.header.height && file.bytes <= 50_000)
        }
    }

    /// A Braze push story: 2:1 pages; a page that fails goes with its `ab_cN_*` keys and the
    /// pages after it are numbered on, without a gap (Braze shows pages up to the first missing
    /// one); a gap in the payload is closed the same way.
    @Test func brazeStoryPagesStayInOrderWithoutGaps() async throws {
        try serve("photo-exif.jpg", at: ["/b0", "/b2", "/b3"])
        origin.route("/b1", .status(404, body: "no"))
        let result = try await process(
            """
            {"ab_c": "1", "t": "Story", "ab_c0_i": "\(origin.url("/b0"))", "ab_c0_t": "zero",
             "ab_c1_i": "\(origin.url("/b1"))", "ab_c1_t": "one", "ab_c1_uri": "app://1",
             "ab_c2_i": "\(origin.url("/b2"))", "ab_c2_t": "two",
             "ab_c4_i": "\(origin.url("/b3"))", "ab_c4_t": "four", "ab_c4_uri": "app://4"}
            """)
        let payload = result.payload
        #expect(payload["ab_c0_t"] == .string("zero") && payload["ab_c1_t"] == .string("two"))
        #expect(payload["ab_c2_t"] == .string("four") && payload["ab_c2_uri"] == .string("app://4"))
        #expect(payload["ab_c3_i"] == nil && payload["ab_c4_i"] == nil && payload["ab_c1_uri"] == nil)
        #expect(payload["ab_c"] == .string("1") && payload["t"] == .string("Story"))
        var decoded: Int64 = 0
        for key in ["ab_c0_i", "ab_c1_i", "ab_c2_i"] {
            let file = try stored(try #require(payload[key]?.stringValue))
            let aspect = Double(file.header.width) / Double(file.header.height)
            #expect(abs(aspect - 2) < 0.01, "\(file.header.width)×\(file.header.height) is not 2:1")
            #expect(file.bytes <= 500_000)
            decoded += Int64(file.header.width * file.header.height * 4)
        }
        #expect(decoded < Templates.androidBitmapLimit)
        #expect((result.outcome.warnings ?? []).contains { $0.contains("ab_c pages numbered") })
    }

    /// CleverTap's iOS content slider in an APNs payload: landscape items made 16:9 in a format
    /// iOS shows; an item that fails is removed from `items`, the rest kept in order.
    @Test func cleverTapSliderOnIOS() async throws {
        try serve("banner.webp", at: ["/w1", "/w2"])
        origin.route("/w-missing", .status(404, body: "no"))
        let result = try await process(
            """
            {"aps": {"alert": {"title": "Hi", "body": "Slides"}, "mutable-content": 1, "category": "CTNotification"},
             "ct_ContentSlider": {"orientation": "landscape", "showsPaging": 1, "autoPlay": 1, "items": [
              {"caption": "one", "imageUrl": "\(origin.url("/w1"))", "actionUrl": "app://1"},
              {"caption": "gone", "imageUrl": "\(origin.url("/w-missing"))", "actionUrl": "app://x"},
              {"caption": "two", "imageUrl": "\(origin.url("/w2"))", "actionUrl": "app://2"}]}}
            """)
        let items = try #require(result.payload[path: JSONPath(keys: "ct_ContentSlider", "items")]?.arrayValue)
        #expect(items.count == 2)
        #expect(items.map { $0.objectValue?["caption"] } == [.string("one"), .string("two")])
        // The descriptor names each item where it now is, for the phone to attach every image.
        let described = try #require(result.descriptor?["items"]?.arrayValue).map { $0.objectValue?["path"] }
        #expect(
            described == [.string("ct_ContentSlider.items[0].imageUrl"), .string("ct_ContentSlider.items[1].imageUrl")])
        for item in items {
            let file = try stored(try #require(item.objectValue?["imageUrl"]?.stringValue))
            #expect([.jpeg, .png].contains(file.format))
            let aspect = Double(file.header.width) / Double(file.header.height)
            #expect(abs(aspect - 16.0 / 9.0) < 0.02, "\(file.header.width)×\(file.header.height) is not 16:9")
        }
        #expect(result.payload[path: JSONPath(keys: "aps", "alert", "body")] == .string("Slides"))
    }

    /// A slider in an APNs payload near 4,096 bytes, which the store's longer URLs would take
    /// over: its items are refused (`payload_too_large`), the payload goes out within the limit,
    /// its text whole.
    @Test func urlsThatWouldOverflowAPNsLimitAreRefused() async throws {
        try serve("banner.webp", at: ["/o1", "/o2"])
        let padding = String(repeating: "x", count: 3_820)
        let json = """
            {"aps": {"alert": {"title": "Hi", "body": "\(padding)"}, "mutable-content": 1},
             "ct_ContentSlider": {"orientation": "landscape", "items": [
              {"caption": "one", "imageUrl": "\(origin.url("/o1"))"},
              {"caption": "two", "imageUrl": "\(origin.url("/o2"))"}]}}
            """
        // Under the limit as it comes (it is refused before any fetch otherwise).
        #expect(
            JSONValue.object(try #require(try JSONValue.parse(Array(json.utf8)).objectValue)).compactByteCount < 4_096)
        let result = try await process(json)
        #expect(result.bytes.count <= PayloadRewriter.apnsLimit)
        #expect(result.payload[path: JSONPath(keys: "aps", "alert", "body")] == .string(padding))
        let media = try #require(result.outcome.media)
        #expect(media.count == 2 && media.allSatisfy { $0.reason == "payload_too_large" }, "\(media)")
    }

    /// The plan alone: the long edges it gives keep the decoded bytes under the limit for any
    /// number of pages, and never go below what the limit forces.
    @Test func planKeepsEveryCountUnderTheLimit() throws {
        for count in 1...10 {
            var map = JSONObject([("ab_c", .string("1"))])
            for page in 0..<count { map["ab_c\(page)_i"] = .string("https://cdn.example/\(page).jpg") }
            let slots = Templates.slots(in: map, data: JSONPath([]), vendors: [.braze])
            #expect(slots.count == count)
            let total = slots.reduce(Int64(0)) {
                $0 + Templates.pixels(edge: $1.platform.longEdge ?? 0, aspect: $1.platform.aspect) * 4
            }
            #expect(total < Templates.androidBitmapLimit, "\(count) pages: \(total)")
            // One page more than the budget allows would be over: the edges are not cut too far.
            let edge = try #require(slots.first?.platform.longEdge)
            if edge < 1080 {
                #expect(Templates.pixels(edge: edge + 2, aspect: 2) * 4 * Int64(count) >= Templates.androidBitmapLimit)
            }
        }
    }
}
