import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// Strangers' URLs, bytes and payloads: each case ends with a defined status and reason,
/// within its budget (plus `lateness`), and leaves no partial file behind.
@Suite("Hostile input")
struct HostileInputTests {
    let origin: TestOrigin
    /// A second origin: a port the SSRF rule does not trust.
    let other: TestOrigin
    let store = TemporaryDirectory()
    static let budget: Duration = .seconds(2)

    init() throws {
        origin = try TestOrigin()
        other = try TestOrigin()
        other.route("/secret", .file(body: Array("internal".utf8), contentType: "text/plain"))
    }

    /// Private networks denied, as in production; only the first origin's exact address:port is trusted.
    func pipeline(_ adjust: (inout PushMediaConfig) -> Void = { _ in }) throws -> Pipeline {
        var config = testConfig(store: store, budget: Self.budget, allowPrivate: false)
        config.trustedPeers = ["127.0.0.1:\(origin.port)"]
        adjust(&config)
        return try Pipeline(config: config)
    }

    @discardableResult
    func expect(
        _ url: String, _ status: OutcomeStatus, _ reason: String?, pipeline: Pipeline? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> PipelineResult {
        let pipeline = try pipeline ?? self.pipeline()
        let start = ContinuousClock.now
        let result = await pipeline.process(payload([("media_url", .string(url))]))
        let elapsed = ContinuousClock.now - start
        #expect(result.outcome.status == status, "\(url): \(result.outcome)", sourceLocation: sourceLocation)
        #expect(
            result.outcome.reason == reason, "\(url): \(result.outcome.message ?? "")", sourceLocation: sourceLocation)
        #expect(
            elapsed < pipeline.config.budget + lateness, "\(url) took \(elapsed)", sourceLocation: sourceLocation)
        #expect(result.payload["aps"] == payload([])["aps"], sourceLocation: sourceLocation)
        // A job cut off by the budget removes its download as it stops, just after the answer.
        for _ in 0..<20 where !leftovers(store).isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        #expect(leftovers(store).isEmpty, sourceLocation: sourceLocation)
        #expect(nonFinalStoreFiles(store).isEmpty, sourceLocation: sourceLocation)
        return result
    }

    // MARK: origin tricks

    @Test func slowAndEndlessOrigins() async throws {
        origin.route("/drip", .drip(contentType: "image/jpeg", bytesPerSecond: 1, total: 100_000))
        origin.route("/endless", .endless(contentType: "image/jpeg"))
        try await expect(origin.url("/drip"), .bestAttempt, "budget_exceeded")
        try await expect(
            origin.url("/endless"), .rejected, "too_large", pipeline: try pipeline { $0.maxSourceBytes = 3_000_000 })
    }

    @Test func lyingContentLengths() async throws {
        let jpeg = try sampleMedia("no-extension")
        origin.route(
            "/short", .headers([("Content-Type", "image/jpeg"), ("Content-Length", "300")], status: 200, body: jpeg))
        origin.route("/long", .declaredLength(jpeg.count * 2, body: jpeg, contentType: "image/jpeg"))
        try await expect(origin.url("/short"), .rejected, "decode_failed")
        try await expect(origin.url("/long"), .rejected, "fetch_failed")
    }

    @Test func compressedBodiesAreNeverInflated() async throws {
        origin.route(
            "/bomb.jpg",
            .headers(
                [
                    ("Content-Type", "image/jpeg"), ("Content-Encoding", "gzip"),
                    ("Content-Length", "\(HostileFixtures.gzipBomb.count)"),
                ], status: 200, body: HostileFixtures.gzipBomb))
        try await expect(origin.url("/bomb.jpg"), .rejected, "unsupported_type")
    }

    @Test func redirectLoopsAndChains() async throws {
        origin.route("/loop", .redirect(to: "/loop"))
        for hop in 0..<10 { origin.route("/r\(hop)", .redirect(to: "/r\(hop + 1)")) }
        origin.route("/r10", .file(body: try sampleMedia("no-extension"), contentType: "image/jpeg"))
        try await expect(origin.url("/loop"), .rejected, "too_many_redirects")
        try await expect(origin.url("/r0"), .rejected, "too_many_redirects")
    }

    @Test(
        "redirects into the network are refused on the resolved address",
        arguments: [
            "http://127.0.0.1:{other}/secret", "http://[::1]:{other}/secret",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/", "http://[::ffff:127.0.0.1]:{other}/secret", "http://2130706433:{other}/secret",
            "http://0177.0.0.1:{other}/secret", "http://localhost:{other}/secret", "http://[::ffff:7f00:1]:{origin}/x",
        ])
    func redirectsIntoTheNetwork(_ template: String) async throws {
        let target = template.replacingOccurrences(of: "{other}", with: "\(other.port)").replacingOccurrences(
            of: "{origin}", with: "\(origin.port)")
        let path = "/to-\(abs(template.hashValue))"
        origin.route(path, .redirect(to: target))
        try await expect(origin.url(path), .rejected, "blocked_address")
        #expect(other.hits("/secret") == 0)
    }

    @Test(
        "other schemes are refused, directly and through redirects",
        arguments: [
            "file:///etc/passwd", "gopher://127.0.0.1:70/_x", "ftp://example.com/a.jpg", "dict://127.0.0.1:11211/stat",
        ])
    func otherSchemes(_ url: String) async throws {
        try await expect(url, .rejected, "unsupported_scheme")
        let path = "/scheme-\(abs(url.hashValue))"
        origin.route(path, .redirect(to: url))
        try await expect(origin.url(path), .rejected, "unsupported_scheme")
    }

    @Test func credentialsInTheURLAreRefused() async throws {
        try await expect("http://user:password@127.0.0.1:\(origin.port)/x.jpg", .rejected, "invalid_url")
    }

    @Test func anErrorPageServedAsAnImage() async throws {
        origin.route(
            "/oops.jpg",
            .file(
                body: Array("<!doctype html><title>500</title><h1>Internal error</h1>".utf8), contentType: "image/jpeg")
        )
        try await expect(origin.url("/oops.jpg"), .rejected, "unsupported_type")
    }

    // MARK: media tricks

    @Test func pixelBombIsRefusedFromItsHeader() async throws {
        origin.route(
            "/bomb.png",
            .file(body: HostileFixtures.pngClaiming(width: 30_000, height: 30_000), contentType: "image/png"))
        try await expect(origin.url("/bomb.png"), .rejected, "too_many_pixels")
    }

    @Test func thousandsOfFramesAreReducedToOne() async throws {
        origin.route("/frames.gif", .file(body: HostileFixtures.gif(frames: 5_000), contentType: "image/gif"))
        // Reading 5,000 frames' headers is real work: a budget it cannot run out of on a slow machine.
        let pipeline = try pipeline { $0.budget = roomyBudget }
        try await expect(origin.url("/frames.gif"), .processed, nil, pipeline: pipeline)
        let result = await pipeline.process(payload([("media_url", .string(origin.url("/frames.gif")))]))
        let name = try #require(result.outcome.attachment?.url.split(separator: "/").last.map(String.init))
        #expect(try Transcoder(config: PushMediaConfig()).header(path: store.file(name)).frames == 1)
    }

    @Test(
        "broken, empty and refused media",
        arguments: [
            ("truncated.jpg", "decode_failed"), ("", "unsupported_type"), ("svg", "unsupported_type"),
            ("pdf", "unsupported_type"),
            ("psd", "unsupported_type"), ("mov", "decode_failed"),
        ])
    func refusedMedia(_ kind: String, _ reason: String) async throws {
        let body: [UInt8] =
            switch kind {
            case "": []
            case "svg": HostileFixtures.svg
            case "pdf": HostileFixtures.pdf
            case "psd": HostileFixtures.psd
            case "mov": HostileFixtures.quicktime
            default: try sampleMedia(kind)
            }
        let path = "/media-\(kind.isEmpty ? "empty" : kind).mp4"
        origin.route(path, .file(body: body, contentType: "video/mp4"))
        let result = try await expect(origin.url(path), .rejected, reason)
        // The reference is removed and the descriptor tells the phone why.
        #expect(result.payload["media_url"] == nil)
        #expect(result.descriptor?["reason"] == .string(reason))
    }

    @Test func aPolyglotIsServedOnlyAsTheImageItIs() async throws {
        origin.route(
            "/poly.gif",
            .file(
                body: HostileFixtures.gif(frames: 1, comment: "<html><script>alert(document.domain)</script></html>"),
                contentType: "text/html"))
        let result = await (try pipeline()).process(payload([("media_url", .string(origin.url("/poly.gif")))]))
        #expect(result.outcome.status == .passthrough)
        #expect(result.outcome.attachment?.mime == "image/gif")
        #expect(result.outcome.attachment?.url.hasSuffix(".gif") == true)
    }

    @Test func audioAndVideoOverApplesCaps() async throws {
        origin.route(
            "/big.mp3",
            .file(body: HostileFixtures.padded(try sampleMedia("chime.mp3"), to: 6_000_000), contentType: "audio/mpeg"))
        origin.route(
            "/big.mp4",
            .file(body: HostileFixtures.padded(try sampleMedia("clip.mp4"), to: 55_000_000), contentType: "video/mp4"))
        // Downloads and transcodes that must finish: a budget they cannot run out of on a slow machine.
        let roomy = try pipeline { $0.budget = roomyBudget }
        // Over Apple's 5 MB: transcoded to fit (the padding is no audio).
        let result = await roomy.process(payload([("media_url", .string(origin.url("/big.mp3")))]))
        #expect(result.outcome.status == .processed, "\(result.outcome.message ?? "")")
        #expect(
            result.outcome.attachment?.mime == "audio/mp4" && result.outcome.attachment?.url.hasSuffix(".m4a") == true)
        #expect((result.outcome.attachment?.bytes ?? .max) < 5_000_000)
        // A 55 MB MP4, over Apple's 50 MB: transcoded to fit.
        let video = await roomy.process(payload([("media_url", .string(origin.url("/big.mp4")))]))
        #expect(video.outcome.status == .processed, "\(video.outcome.message ?? "")")
        #expect(
            video.outcome.attachment?.mime == "video/mp4" && (video.outcome.attachment?.bytes ?? .max) <= 50_000_000)
        // Over the download cap: never fetched whole.
        try await expect(
            origin.url("/big.mp4"), .rejected, "too_large", pipeline: try pipeline { $0.maxSourceBytes = 40_000_000 })
    }

    // MARK: payload tricks

    @Test func malformedPayloadsAreTypedErrors() async throws {
        let pipeline = try pipeline()
        let deep =
            Array(repeating: UInt8(ascii: "["), count: 10_000) + Array(repeating: UInt8(ascii: "]"), count: 10_000)
        let cases: [[UInt8]] = [
            deep,
            Array(#"{"aps":{"alert":"x"},"media_url":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8),
            Array(#"{"media_url":"a","media_url":"b","aps":{"alert":"x"}}"#.utf8),
        ]
        for bytes in cases {
            await #expect(throws: PayloadError.self) { try await pipeline.process(bytes) }
        }
    }

    @Test func oversizedPayloadsKeepTheirText() async throws {
        let pipeline = try pipeline()
        let huge =
            Array(#"{"aps":{"alert":"x","mutable-content":1},"media_url":"http://a.example/x.jpg","blob":""#.utf8)
            + [UInt8](repeating: UInt8(ascii: "a"), count: 10_000_000) + Array(#""}"#.utf8)
        let result = try await pipeline.process(huge)
        #expect(result.outcome.reason == "payload_too_large")
        #expect(result.payload["blob"]?.stringValue?.count == 10_000_000)
        // Sanitizers slow the byte counting of 10 MB down tenfold.
        #expect(result.outcome.timingsMs.total < (underSanitizer ? 20_000 : 2_000))
        try await expect("https://example.com/" + String(repeating: "a", count: 10_000), .rejected, "payload_too_large")
        let number = await pipeline.process(payload([("media_url", .number("1e999"))]))
        #expect(number.outcome.reason == "invalid_media_reference")
    }
}
