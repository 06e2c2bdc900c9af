import Foundation
import Testing

@testable import PushMedia

@Suite("Media URLs: grammar, signatures, allow-list")
struct MediaURLTests {
    /// imgproxy's documented key and salt; the signature below was computed apart, with Python's
    /// `hmac` over the salt and the path.
    static let key = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
    static let salt = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"

    @Test func signaturesAreImgproxys() throws {
        let key = try #require(MediaURLKey(hexKey: Self.key, hexSalt: Self.salt))
        let path = "/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png"
        #expect(key.sign(path) == "90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf40")
        #expect(key.verifies("90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf40", for: path))
        #expect(!key.verifies("90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf4", for: path))  // truncated
        #expect(!key.verifies("90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf41", for: path))  // one bit off
        #expect(!key.verifies("90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf40", for: path + "x"))
        #expect(!key.verifies("not base64!", for: path))
        #expect(MediaURLKey(hexKey: "abc", hexSalt: Self.salt) == nil)  // odd length
        #expect(MediaURLKey(hexKey: "zz", hexSalt: Self.salt) == nil)
        #expect(MediaURLKey(hexKey: "", hexSalt: Self.salt) == nil)
        #expect("\(key)".contains(Self.key.prefix(8)) == false)

        // The documented example parses: its shape options are ignored, its source and format read.
        let url = try MediaURL.parse("/90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf40" + path)
        #expect(url.source == "http://example.com/images/curiosity.jpg")
        #expect(url.format == .png)
        #expect(url.ignored == ["rs:fill:300:400:0", "g:sm"])
        #expect(url.signedPath == path)
        #expect(url.encoding == .base64)
    }

    @Test func plainSourcesAndOptions() throws {
        let url = try MediaURL.parse(
            "/insecure/pr:android/cb:2026-11/plain/https://cdn.shop.example/a%2520b/photo.png%3Fv%3D2@jpg")
        #expect(url.isUnsigned)
        #expect(url.preset == "android")
        #expect(url.cacheBuster == "2026-11")
        #expect(url.source == "https://cdn.shop.example/a%20b/photo.png?v=2")
        #expect(url.format == .jpeg)
        #expect(url.encoding == .plain)
        #expect(url.signedPath(withExtension: "png") == url.signedPath + "@png")

        // pyimgproxy's shape: `format:` instead of an extension, `_` unsigned.
        let formatted = try MediaURL.parse("/_/format:jpg/plain/https://cdn.shop.example/banner")
        #expect(formatted.format == .jpeg && formatted.isUnsigned && formatted.preset == nil)
        // No extension at all: the profile chooses (a redirect).
        #expect(try MediaURL.parse("/_/plain/https://cdn.shop.example/banner").format == nil)
        #expect(try MediaURL.parse("/x/aHR0cHM6Ly9hLmV4YW1wbGUvYg").format == nil)
        // The extension and `f:` must agree.
        #expect(throws: MediaURLError.self) { try MediaURL.parse("/_/f:png/plain/https://a.example/b@jpg") }
        #expect(try MediaURL.parse("/_/f:jpeg/plain/https://a.example/b@jpg").format == .jpeg)
        // Base64 split by `/`, padding or not.
        let split = try MediaURL.parse("/s/aHR0cHM6Ly9h/LmV4YW1wbGUvYg==.mp4")
        #expect(split.source == "https://a.example/b" && split.format == .mp4)
        // What the helper writes, the parser reads.
        for plain in [false, true] {
            let source = "https://cdn.shop.example/p@th/i?mg=1&x=%41"
            let path = MediaURL.unsignedPath(source: source, options: ["pr:web"], ext: "gif", plain: plain)
            let parsed = try MediaURL.parse("/insecure" + path)
            #expect(parsed.source == source, "plain: \(plain)")
            #expect(parsed.format == .gif && parsed.preset == "web")
        }
    }

    @Test func refusals() {
        func error(_ path: String) -> MediaURLError? {
            do {
                _ = try MediaURL.parse(path)
                return nil
            } catch { return error }
        }
        #expect(error("/") == .notAMediaURL)
        #expect(error("/healthz") == .notAMediaURL)
        #expect(error("/sig/") == .notAMediaURL)
        #expect(error("//plain/https://a.example/b@jpg") == .notAMediaURL)
        #expect(error("/_/zoom:2/plain/https://a.example/b@jpg") == .unknownOption("zoom"))
        #expect(error("/_/pr:ios:android/plain/https://a.example/b@jpg")?.code == "invalid_option")
        #expect(error("/_/plain/https://a.example/b@webp") == .unknownFormat("webp"))
        #expect(error("/_/aHR0cHM6Ly9hLmV4YW1wbGUvYg.heic") == .unknownFormat("heic"))
        #expect(error("/_/plain/https://a.example/" + String(repeating: "a", count: 17_000))?.code == "uri_too_long")
        for bad in [
            "/_/plain/ftp://a.example/b@jpg", "/_/plain/file:///etc/passwd@jpg", "/_/plain/https://@jpg",
            "/_/plain/https://u:p@a.example/b@jpg", "/_/plain/https://a.example/x/../b@jpg",
            "/_/plain/https://a.example/x/%2e%2e/b@jpg", "/_/plain/https://a.example/x%2F..%2Fb@jpg",
            "/_/plain/https://a.example/x/./b@jpg", "/_/plain/https://a.example/%@jpg", "/_/plain/https://a b/c@jpg",
            "/_/plain/https://a.example%252eevil.com/b@jpg", "/_/plain/https://a.example/a%20b@jpg", "/_/!!!.jpg",
            "/_/plain/https://a.example\\@b.example/@jpg",
        ] {
            #expect(error(bad)?.code == "invalid_source", "\(bad)")
        }
    }

    @Test func allowListMatchesWholeSchemeHostAndPort() throws {
        let prefix = try #require(SourcePrefix("https://cdn.shop.example/campaigns/"))
        #expect(prefix.matches("https://cdn.shop.example/campaigns/a.jpg"))
        #expect(prefix.matches("HTTPS://CDN.shop.example/campaigns/a.jpg"))
        #expect(prefix.matches("https://cdn.shop.example:443/campaigns/a.jpg"))
        for other in [
            "https://cdn.shop.example.evil.com/campaigns/a.jpg", "https://evil.com/https://cdn.shop.example/campaigns/",
            "https://cdn.shop.example@evil.com/campaigns/a.jpg", "https://x@cdn.shop.example/campaigns/a.jpg",
            "https://cdn.shop.example:8443/campaigns/a.jpg", "http://cdn.shop.example/campaigns/a.jpg",
            "https://cdn.shop.example/other/a.jpg", "https://cdn.shop.example/campaignsX/a.jpg",
            "https://cdn.shop.example", "https://evilcdn.shop.example/campaigns/a.jpg",
        ] {
            #expect(!prefix.matches(other), "\(other)")
        }
        let host = try #require(SourcePrefix("https://cdn.shop.example"))
        #expect(host.matches("https://cdn.shop.example/a.jpg"))
        #expect(!host.matches("https://cdn.shop.example.evil.com/a.jpg"))
        #expect(SourcePrefix("*")?.matchesEverything == true)
        for bad in ["cdn.shop.example/", "https://", "https://u@cdn.shop.example/", "https://a.example/?x", "ftp://a/"]
        {
            #expect(SourcePrefix(bad) == nil, "\(bad)")
        }
    }

    @Test func aProfileDeliveringOneFormat() throws {
        let jpeg = try #require(PlatformProfile.ios.delivering(.jpeg))
        #expect(jpeg.acceptedFormats == [.jpeg] && !jpeg.alpha && !jpeg.animation)
        #expect(jpeg.maxVideoBytes == 0 && jpeg.maxAudioBytes == 0 && jpeg.maxImageBytes == 10_000_000)
        let gif = try #require(PlatformProfile.ios.delivering(.gif))
        #expect(gif.animation && gif.alpha)
        #expect(PlatformProfile.web.delivering(.gif)?.animation == false)
        let audio = try #require(PlatformProfile.ios.delivering(.m4a))
        #expect(audio.maxImageBytes == 0 && audio.maxVideoBytes == 0 && audio.maxAudioBytes == 5_000_000)
        #expect(PlatformProfile.android.delivering(.m4a) == nil)
        #expect(PlatformProfile.android.delivering(.gif) == nil)
        #expect(PlatformProfile.huawei.delivering(.mp4) == nil)
        // An image asked of a video URL, and the other way round, are refused with the reason.
        let png = SniffResult(format: .png, magicMIME: "image/png", description: "PNG image data")
        guard case let .reject(reason, message) = PlatformProfile.ios.delivering(.mp4)!.decide(png, bytes: 10) else {
            Issue.record("an image behind .mp4 is not refused")
            return
        }
        #expect(reason == "unsupported_type" && message.contains(".mp4"))
    }
}
