import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// Media URLs through the hook's router, against a real origin on 127.0.0.1 and the real
/// libraries: what each extension delivers, the answer's headers, signatures, the allow-list, and
/// hostile paths and sources.
@Suite("Media URLs")
struct MediaURLRouteTests {
    static let key = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
    static let salt = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"
    let origin: TestOrigin
    let work = TemporaryDirectory()

    init() throws {
        origin = try TestOrigin()
        origin.route("/banner", .file(body: try sampleMedia("banner.webp"), contentType: nil))
        origin.route("/logo.png", .file(body: try sampleMedia("logo-alpha.png"), contentType: "image/png"))
        origin.route("/spinner.gif", .file(body: try sampleMedia("spinner.gif"), contentType: "image/gif"))
        origin.route("/portrait.heic", .file(body: try sampleMedia("portrait.heic"), contentType: "image/heic"))
        origin.route("/clip.webm", .file(body: try sampleMedia("clip.webm"), contentType: "video/webm"))
        origin.route("/photo.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
    }

    /// A server with media URLs signed by the test key and unsigned ones for the origin.
    func server(
        _ adjust: (inout PushMediaConfig) -> Void = { _ in }, urls: (inout MediaURLConfig) -> Void = { _ in },
        clock: TestClock? = nil
    ) throws -> TestServer {
        let prefix = try #require(SourcePrefix(origin.baseURL + "/"))
        return try TestServer(
            adjust,
            server: { server in
                server.urls.keys = [Self.key]
                server.urls.salts = [Self.salt]
                server.urls.allowedSources = [prefix]
                urls(&server.urls)
            }, clock: clock)
    }

    /// `/insecure/pr:<profile>/plain/<source>@<ext>`.
    func unsigned(_ path: String, profile: String = "ios", ext: String? = "jpg") -> String {
        "/insecure" + MediaURL.unsignedPath(source: origin.url(path), options: ["pr:" + profile], ext: ext, plain: true)
    }

    /// The same, signed with `key` (Base64 source).
    static func signed(_ source: String, profile: String = "ios", ext: String? = "jpg", key: MediaURLKey) -> String {
        let path = MediaURL.unsignedPath(source: source, options: ["pr:" + profile], ext: ext)
        return "/" + key.sign(path) + path
    }

    static var testKey: MediaURLKey { MediaURLKey(hexKey: key, hexSalt: salt)! }

    /// Runs FFmpeg (a test fixture's maker) and waits for it.
    static func ffmpeg(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        process.arguments = ["-nostdin", "-loglevel", "error"] + arguments
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "ffmpeg \(arguments)")
    }

    static func header(_ response: TestResponse, _ name: String) -> String? {
        response.headers[HTTPField.Name(name)!]
    }

    static func errorCode(_ response: TestResponse) -> String? {
        response.body.object?["error"]?.objectValue?["code"]?.stringValue
    }

    /// The header of an image answer, read by libvips.
    func imageHeader(_ body: ByteBuffer, _ name: String) throws -> ImageHeader {
        let path = work.file(name)
        try Data(body.readableBytesView).write(to: URL(fileURLWithPath: path))
        return try Transcoder(config: PushMediaConfig()).header(path: path)
    }

    @Test func aWebPWithoutExtensionArrivesAsAJPEGWithItsHeaders() async throws {
        let server = try server()
        let uri = unsigned("/banner")
        try await server.test { client in
            let etag = try await client.execute(uri: uri, method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "image/jpeg")
                #expect(Array(response.body.readableBytesView.prefix(3)) == [0xFF, 0xD8, 0xFF])
                #expect(response.body.readableBytes <= 10_000_000)
                #expect(response.headers[.contentLength] == String(response.body.readableBytes))
                #expect(Self.header(response, "Content-Disposition") == #"inline; filename="banner.jpg""#)
                #expect(Self.header(response, "X-PushMedia-Outcome") == "processed")
                let control = try #require(response.headers[.cacheControl])
                #expect(control.hasPrefix("public, max-age="))
                let sha = Array(response.body.readableBytesView).withUnsafeBytes { MediaStore.sha256($0) }
                #expect(response.headers[.eTag] == "\"\(sha)\"")
                return try #require(response.headers[.eTag])
            }
            try await client.execute(uri: uri, method: .get) { response in
                #expect(response.status == .ok)
                #expect(Self.header(response, "X-PushMedia-Outcome") == "processed/cache")
            }
            try await client.execute(uri: uri, method: .head) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes == 0)
                #expect(response.headers[.contentType] == "image/jpeg")
                #expect(Int(response.headers[.contentLength] ?? "") ?? 0 > 1000)
            }
            try await client.execute(uri: uri, method: .get, headers: [.ifNoneMatch: etag]) { response in
                #expect(response.status == .notModified)
                #expect(response.body.readableBytes == 0)
            }
            try await client.execute(uri: uri, method: .get, headers: [.range: "bytes=0-9"]) { response in
                #expect(response.status == .partialContent)
                #expect(response.body.readableBytes == 10)
                #expect(response.headers[.contentRange]?.hasPrefix("bytes 0-9/") == true)
            }
            try await client.execute(uri: "/metrics", method: .get) { response in
                let text = String(buffer: response.body)
                #expect(text.contains(#"pushmedia_media_url_requests_total{profile="ios",outcome="processed"} 1"#))
                #expect(text.contains(#"pushmedia_media_url_requests_total{profile="ios",outcome="cache"} 4"#))
            }
        }
        #expect(origin.hits("/banner") == 1)
    }

    /// Template presets for a campaign tool's carousel and story fields: `pr:carousel` makes a 3:2
    /// JPEG within CleverTap's 86 KB, `pr:story` a 2:1 page planned among five, signed or not; an
    /// unknown preset names every one there is.
    @Test func templatePresetsMakeTemplateImages() async throws {
        let server = try server()
        let photo = origin.url("/photo.jpg")
        try await server.test { client in
            for (profile, aspect, limit) in [("carousel", 1.5, 86_000), ("story", 2.0, 500_000)] {
                let uri = Self.signed(photo, profile: profile, key: Self.testKey)
                try await client.execute(uri: uri, method: .get) { response in
                    #expect(response.status == .ok, "pr:\(profile)")
                    #expect(response.headers[.contentType] == "image/jpeg")
                    #expect(response.body.readableBytes <= limit, "pr:\(profile)")
                    let header = try imageHeader(response.body, profile + ".jpg")
                    let shape = Double(header.width) / Double(header.height)
                    #expect(abs(shape - aspect) < 0.01, "pr:\(profile): \(header.width)×\(header.height)")
                    let planned = try #require(Templates.presets[profile]?.longEdge)
                    #expect(header.width == planned, "pr:\(profile)")
                }
            }
            try await client.execute(uri: unsigned("/photo.jpg", profile: "slideshow"), method: .get) { response in
                #expect(response.status == .badRequest)
                #expect(
                    response.body.object?["error"]?.objectValue?["message"]?.stringValue?.contains("carousel") == true)
            }
        }
    }

    @Test func eachExtensionDeliversItsFormat() async throws {
        let flac = work.file("tone.flac")
        try Self.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=2", "-c:a", "flac", "-y", flac])
        origin.route(
            "/tone.flac", .file(body: Array(try Data(contentsOf: URL(fileURLWithPath: flac))), contentType: nil))
        let server = try server()
        try await server.test { client in
            // A PNG with alpha: a .jpg is opaque (flattened on white), a .png keeps its alpha.
            try await client.execute(uri: unsigned("/logo.png", ext: "jpg"), method: .get) { response in
                #expect(response.headers[.contentType] == "image/jpeg")
                let header = try imageHeader(response.body, "logo.jpg")
                #expect(!header.hasAlpha)
            }
            try await client.execute(uri: unsigned("/logo.png", ext: "png"), method: .get) { response in
                #expect(response.headers[.contentType] == "image/png")
                let header = try imageHeader(response.body, "logo.png")
                #expect(header.hasAlpha)
                #expect(Self.header(response, "Content-Disposition") == #"inline; filename="logo.png""#)
            }
            // An animated GIF stays animated as a .gif, and is its first frame as a .jpg.
            try await client.execute(uri: unsigned("/spinner.gif", ext: "gif"), method: .get) { response in
                #expect(response.headers[.contentType] == "image/gif")
                let header = try imageHeader(response.body, "spinner.gif")
                #expect(header.frames > 1)
            }
            try await client.execute(uri: unsigned("/spinner.gif", ext: "jpg"), method: .get) { response in
                #expect(response.headers[.contentType] == "image/jpeg")
            }
            try await client.execute(uri: unsigned("/portrait.heic", ext: "jpg"), method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "image/jpeg")
            }
            // A still image as a .gif.
            try await client.execute(uri: unsigned("/photo.jpg", ext: "gif"), method: .get) { response in
                #expect(response.headers[.contentType] == "image/gif")
                #expect(Array(response.body.readableBytesView.prefix(4)) == Array("GIF8".utf8))
            }
            // A WebM behind .mp4 is an H.264 MP4; FLAC behind .m4a an AAC M4A, behind .mp3 an MP3.
            try await client.execute(uri: unsigned("/clip.webm", ext: "mp4"), method: .get) { response in
                #expect(response.headers[.contentType] == "video/mp4")
                #expect(Array(response.body.readableBytesView.dropFirst(4).prefix(4)) == Array("ftyp".utf8))
            }
            try await client.execute(uri: unsigned("/tone.flac", ext: "m4a"), method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "audio/mp4")
                #expect(response.body.readableBytes <= 5_000_000)
            }
            try await client.execute(uri: unsigned("/tone.flac", ext: "mp3"), method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "audio/mpeg")
            }
            // A video behind .jpg is its poster frame.
            try await client.execute(uri: unsigned("/clip.webm", ext: "jpg"), method: .get) { response in
                #expect(response.headers[.contentType] == "image/jpeg")
            }
            // Android: 2:1 within 1 MB.
            try await client.execute(uri: unsigned("/photo.jpg", profile: "android"), method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes <= 1_000_000)
                let header = try imageHeader(response.body, "android.jpg")
                #expect(header.width == 2 * header.height)
            }
            // What the profile cannot show, or the URL cannot be: 422 with the reason.
            try await client.execute(uri: unsigned("/tone.flac", profile: "android", ext: "m4a"), method: .get) {
                response in
                #expect(response.status == .unprocessableContent)
                #expect(Self.errorCode(response) == "unsupported_type")
                #expect(
                    response.body.object?["error"]?.objectValue?["message"]?.stringValue?.contains("android") == true)
            }
            try await client.execute(uri: unsigned("/photo.jpg", ext: "mp4"), method: .get) { response in
                #expect(response.status == .unprocessableContent)
                #expect(Self.errorCode(response) == "unsupported_type")
            }
        }
        #expect(origin.hits("/tone.flac") == 2, "one fetch for the .m4a, one for the .mp3, none for android")
    }

    @Test func aLargePNGWithAlpha() async throws {
        let png = work.file("big.png")
        try Self.ffmpeg([
            "-f", "lavfi", "-i", "testsrc2=s=6000x4000", "-vf",
            "format=rgba,geq=r='r(X,Y)':g='g(X,Y)':b='b(X,Y)':a='if(lt(X,3000),255,64)'", "-frames:v", "1", "-y", png,
        ])
        origin.route(
            "/big.png", .file(body: Array(try Data(contentsOf: URL(fileURLWithPath: png))), contentType: "image/png"))
        let server = try server()
        try await server.test { client in
            try await client.execute(uri: unsigned("/big.png", ext: "jpg"), method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "image/jpeg")
                #expect(response.body.readableBytes <= 10_000_000)
                let header = try imageHeader(response.body, "big.jpg")
                #expect(!header.hasAlpha)
            }
            try await client.execute(uri: unsigned("/big.png", ext: "png"), method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "image/png")
                #expect(response.body.readableBytes <= 10_000_000)
                let header = try imageHeader(response.body, "big-out.png")
                #expect(header.hasAlpha)
            }
        }
    }

    @Test func signaturesAndTheAllowList() async throws {
        let rotated = try #require(MediaURLKey(hexKey: "00ff", hexSalt: "ff00"))
        let server = try server(urls: {
            $0.keys.append("00ff")
            $0.salts.append("ff00")
            $0.allowedSources = [SourcePrefix("https://cdn.shop.example/")!]
        })
        let source = origin.url("/photo.jpg")
        let good = Self.signed(source, key: Self.testKey)
        try await server.test { client in
            try await client.execute(uri: good, method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: Self.signed(source, key: rotated), method: .get) { #expect($0.status == .ok) }
            let signature = good.split(separator: "/")[0]
            for bad in [
                good.replacingOccurrences(of: String(signature), with: String(signature.dropLast(2))),
                good.replacingOccurrences(of: String(signature), with: String(signature.reversed())),
                good.replacingOccurrences(of: "pr:ios", with: "pr:web"),
                "/" + signature + "/pr:ios/plain/" + origin.url("/banner") + "@jpg",
            ] {
                try await client.execute(uri: bad, method: .get) { response in
                    #expect(response.status == .forbidden, "\(bad)")
                    #expect(Self.errorCode(response) == "invalid_signature")
                }
            }
            // Unsigned: only under the allow-list, whose host is another.
            try await client.execute(uri: unsigned("/banner"), method: .get) { response in
                #expect(response.status == .forbidden)
                #expect(Self.errorCode(response) == "source_not_allowed")
            }
        }
        #expect(origin.hits("/banner") == 0, "nothing is fetched for a refused URL")
        #expect(origin.hits("/photo.jpg") == 1)
    }

    @Test func aURLWithoutExtensionRedirectsToTheOneTheProfileChose() async throws {
        let server = try server()
        let source = origin.url("/logo.png")
        let path = MediaURL.unsignedPath(source: source, options: ["pr:ios"], ext: nil)
        try await server.test { client in
            let location = try await client.execute(uri: "/" + Self.testKey.sign(path) + path, method: .get) {
                response in
                #expect(response.status == .found)
                return try #require(response.headers[.location])
            }
            #expect(location == "/" + Self.testKey.sign(path + ".png") + path + ".png")
            try await client.execute(uri: location, method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "image/png")
            }
            try await client.execute(uri: unsigned("/banner", ext: nil), method: .get) { response in
                #expect(response.status == .found)
                #expect(response.headers[.location] == unsigned("/banner", ext: "jpg"))
            }
        }
        #expect(origin.hits("/logo.png") == 1, "the redirect and the file are one entry")
    }

    @Test func processWarmsTheURLsEntryAndACacheBusterFetchesAgain() async throws {
        let server = try server()
        try await server.test { client in
            try await client.execute(
                uri: "/v1/process", method: .post, body: ByteBuffer(json: payloadJSON(origin.url("/banner")))
            ) { #expect($0.status == .ok) }
            try await client.execute(uri: unsigned("/banner"), method: .get) { response in
                #expect(response.status == .ok)
                #expect(Self.header(response, "X-PushMedia-Outcome") == "processed/cache")
            }
            #expect(origin.hits("/banner") == 1)
            for buster in ["1", "2", "2"] {
                let uri =
                    "/insecure"
                    + MediaURL.unsignedPath(
                        source: origin.url("/banner"), options: ["pr:ios", "cb:" + buster], ext: "jpg", plain: true)
                try await client.execute(uri: uri, method: .get) { #expect($0.status == .ok) }
            }
        }
        #expect(origin.hits("/banner") == 3)
    }

    @Test func hostilePathsAndSources() async throws {
        origin.route("/huge", .endless(contentType: "image/jpeg"))
        origin.route("/to-metadata", .redirect(to: "http://169.254.169.254/latest/meta-data/"))
        origin.route("/missing", .status(404, body: "no"))
        origin.route("/broken", .status(503, body: "down"))
        origin.route("/text", .file(body: Array("hello".utf8), contentType: "text/plain"))
        let relaxed = try server { $0.maxSourceBytes = 20_000_000 }
        // The SSRF rule on, the origin's own address trusted (as --trust-peer does).
        let strict = try server {
            $0.allowPrivateNetworks = false
            $0.trustedPeers = ["127.0.0.1:\(origin.port)"]
        }
        try await relaxed.test { client in
            for (uri, status, code) in [
                (
                    unsigned("/photo.jpg").replacingOccurrences(of: "pr:ios", with: "pr:ios/zoom:2"), 400,
                    "invalid_option"
                ),
                ("/insecure/pr:ios/plain/" + origin.url("/a/../photo.jpg") + "@jpg", 400, "invalid_source"),
                ("/insecure/pr:ios/plain/" + origin.url("/a/%252e%252e/photo.jpg") + "@jpg", 400, "invalid_source"),
                ("/insecure/pr:ios/plain/" + origin.url("/photo.jpg") + "@webp", 400, "invalid_format"),
                ("/insecure/pr:watch/plain/" + origin.url("/photo.jpg") + "@jpg", 400, "invalid_option"),
                (unsigned("/" + String(repeating: "a", count: 20_000)), 414, "uri_too_long"),
                (unsigned("/huge"), 422, "too_large"),
                (unsigned("/missing"), 404, "http_404"),
                (unsigned("/broken"), 502, "http_503"),
                (unsigned("/text"), 422, "unsupported_type"),
            ] {
                try await client.execute(uri: uri, method: .get) { response in
                    #expect(response.status.code == status, "\(uri.prefix(120))")
                    #expect(Self.errorCode(response) == code, "\(uri.prefix(120))")
                    #expect(response.headers[.location] == nil)
                    #expect(response.headers[.cacheControl]?.contains("max-age=31536000") != true)
                }
            }
        }
        // With the SSRF rule on, a source on another loopback address, and a redirect to the
        // cloud's metadata address, are refused, with no redirect to either.
        try await strict.test { client in
            for uri in [
                Self.signed("http://127.0.0.2:\(origin.port)/photo.jpg", key: Self.testKey),
                Self.signed("http://[::1]:\(origin.port)/photo.jpg", key: Self.testKey), unsigned("/to-metadata"),
            ] {
                try await client.execute(uri: uri, method: .get) { response in
                    #expect(response.status == .forbidden, "\(uri)")
                    #expect(Self.errorCode(response) == "blocked_address")
                    #expect(response.headers[.location] == nil)
                }
            }
        }
        #expect(origin.hits("/to-metadata") == 1)
        #expect(origin.hits("/photo.jpg") == 0)
    }

    /// A stalled origin: a redirect to the source at the budget, the job going on; then the file.
    @Test func aStalledOriginIsARedirectToTheSourceThenTheFile() async throws {
        origin.route("/slow", .delayed(.seconds(2), body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let server = try server(urls: { $0.budget = .milliseconds(500) })
        try await server.test { client in
            try await client.execute(uri: unsigned("/slow"), method: .get) { response in
                #expect(response.status == .temporaryRedirect)
                #expect(response.headers[.location] == origin.url("/slow"))
                #expect(response.headers[.cacheControl] == "no-store")
                #expect(Self.header(response, "X-PushMedia-Outcome") == "redirect/budget_exceeded")
            }
            // Later requests join the same job (a redirect while it runs), then get the file.
            var outcome: String?
            let start = ContinuousClock.now
            while outcome == nil && ContinuousClock.now - start < .seconds(30) {
                outcome = try await client.execute(uri: unsigned("/slow"), method: .get) { response in
                    response.status == .ok ? Self.header(response, "X-PushMedia-Outcome") : nil
                }
            }
            #expect(outcome == "processed/cache" || outcome == "processed")
        }
        #expect(origin.hits("/slow") == 1)
    }

    /// With every job slot and queue place taken, a new URL is a redirect to its source at once.
    @Test func aFullQueueIsARedirectToTheSourceAtOnce() async throws {
        origin.route("/slow", .delayed(.seconds(3), body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let server = try server({
            $0.maxJobs = 1
            $0.maxQueuedJobs = 0
        })
        try await server.test { client in
            async let busy = client.execute(uri: unsigned("/slow"), method: .get) { $0.status }
            let gate = try #require(server.parts.pipeline.gate)
            #expect(try await eventually { gate.inFlight == 1 }, "the first job never took the slot")
            let started = ContinuousClock.now
            try await client.execute(uri: unsigned("/photo.jpg"), method: .get) { response in
                #expect(response.status == .temporaryRedirect)
                #expect(response.headers[.location] == origin.url("/photo.jpg"))
                #expect(Self.header(response, "X-PushMedia-Outcome") == "redirect/overloaded")
            }
            #expect(ContinuousClock.now - started < .seconds(2))
            #expect(try await busy == .ok)
        }
        #expect(origin.hits("/photo.jpg") == 0)
        let ascii = MediaURLRoutes<AppRequestContext>.asciiURL("https://a.example/é?x=ü")
        #expect(ascii == "https://a.example/%C3%A9?x=%C3%BC")
    }

    @Test func offUnlessConfiguredAndRefusedOpenOnAPublicAddress() async throws {
        let off = try TestServer()
        try await off.test { client in
            try await client.execute(uri: unsigned("/photo.jpg"), method: .get) { response in
                #expect(response.status == .notFound)
            }
        }
        #expect(origin.hits("/photo.jpg") == 0)
        var server = ServerConfig()
        server.host = "0.0.0.0"
        server.tokens = ["t"]
        server.urls.allowedSources = [SourcePrefix("*")!]
        let store = TemporaryDirectory()
        await #expect(throws: ExposureError.self) {
            _ = try await buildApplication(
                config: testConfig(store: store), server: server, baseURLGiven: false, logger: .init(label: "test"))
        }
        server.urls.allowedSources = []
        server.urls.keys = [Self.key]
        #expect(throws: ServerError.self) { try ServerParts(config: testConfig(store: store), server: server) }
    }
}
