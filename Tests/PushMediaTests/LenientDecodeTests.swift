import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// Images a browser shows are delivered: every BMP variant, a TIFF whose pages differ, a GIF
/// with one corrupt frame, a JPEG with an unusable colour profile, an Ultra HDR JPEG. Each
/// fixture is made by code (`ImageFixtures`) and goes through the real pipeline.
@Suite("Lenient decoding")
struct LenientDecodeTests {
    let origin: TestOrigin
    let store = TemporaryDirectory()

    init() throws {
        origin = try TestOrigin()
    }

    func process(_ bytes: [UInt8], at path: String, _ adjust: (inout PushMediaConfig) -> Void = { _ in }) async throws
        -> Outcome
    {
        origin.route(path, .file(body: bytes, contentType: "application/octet-stream"))
        var config = testConfig(store: store)
        adjust(&config)
        return try await Pipeline(config: config).process(payload([("media_url", .string(origin.url(path)))])).outcome
    }

    /// Each BMP variant decodes to the picture it was written from (5- and 6-bit channels to
    /// their nearest 8-bit value).
    @Test(arguments: ImageFixtures.BMPVariant.allCases)
    func everyBMPVariantDecodes(_ variant: ImageFixtures.BMPVariant) throws {
        let picture = ImageFixtures.Picture.sample(colours: variant.colours)
        let image = try BMPDecoder.decode(ImageFixtures.bmp(picture, variant), maxPixels: 1_000_000)
        #expect(image.width == picture.width && image.height == picture.height)
        #expect(image.bands == (variant == .bitfields32Alpha ? 4 : 3))
        func quantized(_ value: UInt8, bits: Int) -> UInt8 {
            let levels = Double((1 << bits) - 1)
            return UInt8((Double(Int(value) >> (8 - bits)) * 255 / levels).rounded())
        }
        var mismatches: [String] = []
        for y in 0..<picture.height {
            for x in 0..<picture.width {
                var (r, g, b) = picture.rgb(x, y)
                if variant == .rgb555 {
                    (r, g, b) = (quantized(r, bits: 5), quantized(g, bits: 5), quantized(b, bits: 5))
                }
                if variant == .bitfields565 {
                    (r, g, b) = (quantized(r, bits: 5), quantized(g, bits: 6), quantized(b, bits: 5))
                }
                let at = (y * picture.width + x) * image.bands
                let got = (image.pixels[at], image.pixels[at + 1], image.pixels[at + 2])
                if got != (r, g, b) { mismatches.append("(\(x),\(y)) \(got) ≠ \((r, g, b))") }
                if image.bands == 4, image.pixels[at + 3] != (x == 0 ? 128 : 255) {
                    mismatches.append("alpha at (\(x),\(y))")
                }
            }
        }
        #expect(mismatches.isEmpty, "\(variant): \(mismatches.prefix(4))")
    }

    @Test func bmpRefusalsSayWhy() {
        let picture = ImageFixtures.Picture.sample(colours: 16)
        var embedded = ImageFixtures.bmp(picture, .rgb24)
        embedded[30] = 4  // BI_JPEG
        #expect(throws: BMPDecoder.Failure.unsupported("an embedded JPEG")) {
            try BMPDecoder.decode(embedded, maxPixels: 1_000_000)
        }
        let cut = Array(ImageFixtures.bmp(picture, .rgb24).prefix(80))
        #expect(throws: BMPDecoder.Failure.truncated) { try BMPDecoder.decode(cut, maxPixels: 1_000_000) }
        #expect(throws: BMPDecoder.Failure.tooManyPixels(width: 7, height: 5)) {
            try BMPDecoder.decode(ImageFixtures.bmp(picture, .rle8), maxPixels: 34)
        }
    }

    @Test func rleBMPsArriveAsJPEG() async throws {
        for variant in [ImageFixtures.BMPVariant.rle8, .rle4, .os2v1Palette8, .bitfields565] {
            let outcome = try await process(ImageFixtures.bmp(.sample(colours: 16), variant), at: "/\(variant).bmp")
            #expect(outcome.status == .processed, "\(variant): \(outcome.reason ?? "") \(outcome.message ?? "")")
            #expect(outcome.attachment?.mime == "image/jpeg" && outcome.attachment?.width == 7, "\(variant)")
        }
    }

    /// A fax-like TIFF whose pages differ in size: the first page is the picture.
    @Test func aMultiPageTIFFDeliversItsFirstPage() async throws {
        let tiff = ImageFixtures.multiPageTIFF(pages: [
            (40, 30, (200, 30, 40)), (20, 50, (20, 180, 60)), (64, 64, (0, 0, 255)),
        ])
        let outcome = try await process(tiff, at: "/fax.tiff")
        #expect(outcome.status == .processed, "\(outcome.reason ?? "") \(outcome.message ?? "")")
        #expect(outcome.attachment?.width == 40 && outcome.attachment?.height == 30)
        #expect(outcome.attachment?.mime == "image/jpeg")
    }

    /// An animation with a corrupt frame: passed through when iOS takes it as it is (the phone
    /// shows the frames it can), its first frame as a still when it must be converted.
    @Test func aGIFWithACorruptFrameIsDelivered() async throws {
        let gif = ImageFixtures.gifWithCorruptFrame()
        let ios = try await process(gif, at: "/spinner.gif")
        #expect(ios.status == .passthrough, "\(ios.reason ?? "") \(ios.message ?? "")")
        // No hint from frames that do not decode. libvips reports the bad frame's error from its
        // worker threads, and with more than one it is now and then lost (about 2 in 100 calls):
        // a frame is then chosen all the same, and it has always been the first, which decodes.
        let frame = ios.media?.first?.hints?.frame
        #expect(frame == nil || frame == 0, "frame hint \(frame ?? -1): the second of three frames does not decode")

        let web = try await process(gif, at: "/spinner-web.gif") { $0.profile = .web }
        #expect(web.status == .processed, "\(web.reason ?? "") \(web.message ?? "")")

        // Converted with the animation kept (an over-cap GIF): the first frame, with a warning.
        let transcoder = Transcoder(config: PushMediaConfig())
        let file = store.file("corrupt.gif")
        try Data(gif).write(to: URL(fileURLWithPath: file))
        let header = try transcoder.header(path: file)
        #expect(header.frames == 3 && transcoder.keepsAnimation(header))
        let attachment = try transcoder.attachment(path: file, header: header)
        #expect(attachment.frames == 1 && attachment.width == 16)
        #expect(attachment.note?.contains("first frame") == true, "\(attachment.note ?? "no note")")
    }

    /// A profile lcms cannot use is ignored (the pixels are taken as sRGB), with a warning.
    @Test func aBrokenICCProfileIsIgnoredWithAWarning() async throws {
        let jpeg = ImageFixtures.jpeg(try sampleMedia("photo-exif.jpg"), withICCProfile: ImageFixtures.brokenICCProfile)
        let transcoder = Transcoder(config: PushMediaConfig())
        let file = store.file("broken-icc.jpg")
        try Data(jpeg).write(to: URL(fileURLWithPath: file))
        let header = try transcoder.header(path: file)
        #expect(header.unusableProfile && !header.hasProfile)

        let outcome = try await process(jpeg, at: "/broken-icc.jpg")
        #expect(outcome.status == .processed, "\(outcome.reason ?? "") \(outcome.message ?? "")")
        #expect(
            outcome.warnings?.contains { $0.contains("ICC colour profile is unusable") } == true,
            "\(outcome.warnings ?? [])")

        // A usable profile gives no warning.
        let plain = try await process(try sampleMedia("photo-exif.jpg"), at: "/plain.jpg")
        #expect(plain.warnings == nil)
    }

    /// Ultra HDR: the primary JPEG is the picture; the gain map after it is ignored.
    @Test func anUltraHDRJPEGIsDelivered() async throws {
        let primary = try sampleMedia("photo-exif.jpg")
        let gainMap = try sampleMedia("no-extension")
        let ultra = ImageFixtures.ultraHDR(primary: primary, secondary: gainMap)
        let outcome = try await process(ultra, at: "/pixel.jpg")
        #expect(outcome.status == .processed, "\(outcome.reason ?? "") \(outcome.message ?? "")")
        #expect(outcome.attachment?.width == 1536 && outcome.attachment?.height == 2048)
    }
}
