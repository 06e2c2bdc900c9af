import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// Real libcurl against a real HTTP origin on 127.0.0.1.
@Suite("Fetch")
struct FetchTests {
    let origin: TestOrigin
    let directory = TemporaryDirectory()
    let fetcher = Fetcher(executor: BlockingExecutor(name: "test-fetch", maxThreads: 8))

    init() throws {
        origin = try TestOrigin()
    }

    func limits(allowPrivate: Bool = true, maxBytes: Int64 = 5_000_000, lowSpeedTime: Duration = .seconds(5))
        -> FetchLimits
    {
        var config = PushMediaConfig()
        config.allowPrivateNetworks = allowPrivate
        config.maxSourceBytes = maxBytes
        config.lowSpeedTime = lowSpeedTime
        return FetchLimits(config: config)
    }

    func fetch(_ path: String, _ limits: FetchLimits? = nil, budget: Duration = .seconds(5)) async -> (
        Result<FetchResponse, FetchError>, String
    ) {
        let target = directory.file(UUID().uuidString)
        do {
            return (
                .success(
                    try await fetcher.fetch(
                        origin.url(path), to: target, limits: limits ?? self.limits(), deadline: .now + budget)), target
            )
        } catch {
            return (.failure(error), target)
        }
    }

    @Test func downloadsBytesExactlyWithoutExtensionAndWithQuery() async throws {
        let body = try sampleMedia("no-extension")
        origin.route("/image", .file(body: body, contentType: "application/octet-stream"))
        let (result, path) = await fetch("/image?id=42&size=large")
        let response = try result.get()
        #expect(response.httpStatus == 200)
        #expect(response.bytes == Int64(body.count))
        #expect(response.contentType == "application/octet-stream")
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == body)
        // Hashed while it streamed: the same digest as the bytes' own.
        #expect(response.sha256 == body.withUnsafeBytes { MediaStore.sha256($0) })
        #expect(response.sha256 == (try MediaStore.sha256(file: path)))
    }

    @Test func followsARedirectChain() async throws {
        let png = try sampleMedia("logo-alpha.png")
        origin.route("/final.png", .file(body: png, contentType: "image/png"))
        origin.route("/r3", .redirect(to: "/final.png"))
        origin.route("/r2", .redirect(to: origin.url("/r3"), status: 301))
        origin.route("/r1", .redirect(to: "/r2", status: 307))
        let response = try await fetch("/r1").0.get()
        #expect(response.redirects == 3)
        #expect(response.effectiveURL.hasSuffix("/final.png"))
        // The redirects' own bodies are not part of the hash.
        #expect(response.sha256 == png.withUnsafeBytes { MediaStore.sha256($0) })
    }

    @Test func stopsRedirectLoopsAndLongChains() async {
        origin.route("/loop", .redirect(to: "/loop"))
        await #expect(throws: FetchError.tooManyRedirects(5)) { try await fetch("/loop").0.get() }
        for hop in 0..<7 { origin.route("/hop\(hop)", .redirect(to: "/hop\(hop + 1)")) }
        origin.route("/hop7", .file(body: [1, 2, 3], contentType: nil))
        await #expect(throws: FetchError.tooManyRedirects(5)) { try await fetch("/hop0").0.get() }
    }

    @Test func reportsHTTPErrors() async {
        origin.route("/gone", .status(404, body: "<h1>Not here</h1>"))
        origin.route("/boom", .status(500, body: "oops"))
        await #expect(throws: FetchError.httpStatus(404)) { try await fetch("/gone").0.get() }
        await #expect(throws: FetchError.httpStatus(500)) { try await fetch("/boom").0.get() }
        await #expect(throws: FetchError.httpStatus(404)) { try await fetch("/unrouted").0.get() }
    }

    @Test func deniesLoopbackUnlessAllowed() async {
        origin.route("/secret", .file(body: Array("internal".utf8), contentType: "text/plain"))
        await #expect(throws: FetchError.blockedAddress("127.0.0.1")) {
            try await fetch("/secret", limits(allowPrivate: false)).0.get()
        }
        #expect(origin.hits("/secret") == 0)
    }

    @Test func refusesRedirectsToOtherSchemes() async {
        origin.route("/to-file", .redirect(to: "file:///etc/passwd"))
        origin.route("/to-gopher", .redirect(to: "gopher://127.0.0.1:70/"))
        await #expect(throws: FetchError.unsupportedScheme("file")) { try await fetch("/to-file").0.get() }
        await #expect(throws: FetchError.unsupportedScheme("gopher")) { try await fetch("/to-gopher").0.get() }
    }

    @Test func capsAnEndlessBodyWhileStreaming() async throws {
        origin.route("/endless", .endless(contentType: "image/jpeg"))
        let (result, path) = await fetch("/endless", limits(maxBytes: 1_000_000))
        #expect(throws: FetchError.tooLarge(limit: 1_000_000)) { try result.get() }
        let written = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? -1
        #expect(written <= 1_000_000)
    }

    @Test func refusesADeclaredLengthOverTheCapBeforeReading() async {
        origin.route("/huge", .declaredLength(10_000_000_000, body: [0xFF, 0xD8, 0xFF], contentType: "image/jpeg"))
        await #expect(throws: FetchError.tooLarge(limit: 1_000_000)) {
            try await fetch("/huge", limits(maxBytes: 1_000_000)).0.get()
        }
    }

    @Test func reportsABodyShorterThanItsContentLength() async {
        origin.route("/short", .declaredLength(5_000, body: [1, 2, 3], contentType: "image/jpeg"))
        let error = await #expect(throws: FetchError.self) { try await fetch("/short").0.get() }
        #expect(error?.reason == "fetch_failed")
    }

    @Test func abortsAtTheDeadlineAgainstADrip() async {
        origin.route("/drip", .drip(contentType: "image/jpeg", bytesPerSecond: 1, total: 1_000))
        let start = ContinuousClock.now
        await #expect(throws: FetchError.deadlineExceeded) {
            try await fetch("/drip", budget: .milliseconds(800)).0.get()
        }
        #expect(ContinuousClock.now - start < .milliseconds(800) + lateness)
    }

    @Test func abortsATransferThatStaysTooSlow() async {
        origin.route("/slow", .drip(contentType: "image/jpeg", bytesPerSecond: 1, total: 1_000))
        let error = await #expect(throws: FetchError.self) {
            try await fetch("/slow", limits(lowSpeedTime: .seconds(1)), budget: .seconds(10)).0.get()
        }
        #expect(error?.reason == "timeout")
    }
}
