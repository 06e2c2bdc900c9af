import Foundation
import PushMedia
import PushMediaTestSupport
import Testing

/// Freshness of cached results: the origin's lifetime within bounds, revalidation with
/// validators, new bytes behind the same URL, per-request refresh and purge. Real libcurl
/// against the test origin on 127.0.0.1, real libvips, a real local store; the time a
/// lifetime runs on is a clock the test moves.
@Suite("Freshness", .serialized)
struct FreshnessTests {
    static let policy = FreshnessPolicy(minimum: .seconds(60), maximum: .seconds(86_400))
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func lifetimeFollowsTheOriginWithinBounds() {
        func lifetime(_ validators: OriginValidators) -> TimeInterval {
            Self.policy.lifetime(validators, now: Self.now)
        }
        #expect(lifetime(OriginValidators(cacheControl: "public, max-age=300")) == 300)
        #expect(
            lifetime(OriginValidators(cacheControl: "max-age=300, s-maxage=900")) == 900,
            "s-maxage is for shared caches")
        #expect(
            lifetime(OriginValidators(cacheControl: "max-age=300", age: "100")) == 200,
            "time already spent in caches counts")
        #expect(lifetime(OriginValidators(cacheControl: "max-age=5")) == 60, "raised to --min-ttl")
        #expect(lifetime(OriginValidators(cacheControl: "max-age=31536000, immutable")) == 86_400, "cut to --max-ttl")
        #expect(lifetime(OriginValidators(cacheControl: "no-cache, max-age=600")) == 60)
        #expect(lifetime(OriginValidators(cacheControl: "private")) == 60)
        #expect(
            lifetime(OriginValidators(expires: "Fri, 15 Jan 2027 08:30:00 GMT", date: "Fri, 15 Jan 2027 08:00:00 GMT"))
                == 1800)
        #expect(lifetime(OriginValidators(expires: "0")) == 60, "an invalid Expires means already stale")
        #expect(
            lifetime(
                OriginValidators(lastModified: "Fri, 15 Jan 2027 00:00:00 GMT", date: "Fri, 15 Jan 2027 10:00:00 GMT"))
                == 3600,
            "10% of the time since it last changed")
        #expect(lifetime(OriginValidators()) == 60, "nothing said: --min-ttl")
    }

    @Test func httpDatesParse() {
        #expect(
            FreshnessPolicy(minimum: .seconds(1), maximum: .seconds(1)).lifetime(OriginValidators(), now: Self.now) == 1
        )
        let policy = FreshnessPolicy(minimum: .seconds(0), maximum: .seconds(10 * 365 * 86_400))
        // RFC 9110's example date is 784111777 seconds after the epoch; a leap day too.
        #expect(
            policy.lifetime(
                OriginValidators(expires: "Sun, 06 Nov 1994 08:49:47 GMT", date: "Sun, 06 Nov 1994 08:49:37 GMT"),
                now: Self.now) == 10)
        #expect(
            policy.lifetime(
                OriginValidators(expires: "Fri, 01 Mar 2028 00:00:00 GMT", date: "Tue, 29 Feb 2028 00:00:00 GMT"),
                now: Self.now) == 86_400)
        #expect(
            policy.lifetime(
                OriginValidators(expires: "Thu, 01 Jan 1970 00:00:00 GMT"),
                now: Date(timeIntervalSince1970: 784_111_777)) == 0)
    }

    static func pipeline(_ store: TemporaryDirectory, minTTL: Duration = .seconds(1), clock: TestClock = TestClock())
        throws -> Pipeline
    {
        var config = testConfig(store: store)
        config.minTTL = minTTL
        return try Pipeline(config: config, clock: clock.wall)
    }

    static func run(_ pipeline: Pipeline, _ url: String, refresh: Bool = false) async -> PipelineResult {
        await pipeline.process(payload([("image_url", .string(url))]), context: PayloadContext(refresh: refresh))
    }

    @Test func aStaleEntryIsRevalidatedAndA304CostsNoTranscode() async throws {
        let origin = try TestOrigin()
        let first = try sampleMedia("photo-exif.jpg")
        origin.route(
            "/banner.jpg",
            .cacheable(
                body: first, contentType: "image/jpeg", etag: "\"v1\"", lastModified: nil, cacheControl: "max-age=2"))
        let store = TemporaryDirectory()
        let clock = TestClock()
        let pipeline = try Self.pipeline(store, clock: clock)
        let url = origin.url("/banner.jpg")

        let made = await Self.run(pipeline, url)
        #expect(made.outcome.status == .processed)
        #expect(made.outcome.cacheHit == false)
        let attachment = try #require(made.outcome.attachment?.url)

        clock.advance(by: .milliseconds(1900))  // just short of max-age=2
        let fresh = await Self.run(pipeline, url)
        #expect(fresh.outcome.cacheHit == true && fresh.outcome.revalidated == nil)
        #expect(origin.hits("/banner.jpg") == 1, "a fresh entry does not ask the origin")

        clock.advance(by: .milliseconds(100))
        let renewed = await Self.run(pipeline, url)
        #expect(renewed.outcome.status == .processed)
        #expect(renewed.outcome.cacheHit == true)
        #expect(renewed.outcome.revalidated == true)
        #expect(renewed.outcome.attachment?.url == attachment)
        #expect(renewed.outcome.timingsMs.transcode == 0 && renewed.outcome.timingsMs.sniff == 0)
        #expect(origin.hits("/banner.jpg") == 2)
        #expect(origin.notModified("/banner.jpg") == 1, "the second request was conditional and answered 304")

        // Renewed for another lifetime: no request now.
        let again = await Self.run(pipeline, url)
        #expect(again.outcome.cacheHit == true && again.outcome.revalidated == nil)
        #expect(origin.hits("/banner.jpg") == 2)
        #expect(leftovers(store).isEmpty)
    }

    @Test func newBytesBehindTheSameURLGiveANewAttachmentAfterTheLifetime() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/banner.jpg",
            .cacheable(
                body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg", etag: "\"spring\"",
                lastModified: "Mon, 02 Mar 2026 09:00:00 GMT", cacheControl: "max-age=2"))
        let store = TemporaryDirectory()
        let clock = TestClock()
        let pipeline = try Self.pipeline(store, clock: clock)
        let url = origin.url("/banner.jpg")
        let spring = await Self.run(pipeline, url)
        #expect(spring.outcome.status == .processed)

        // The campaign replaces the banner behind the same URL.
        origin.route(
            "/banner.jpg",
            .cacheable(
                body: try sampleMedia("banner.webp"), contentType: "image/webp", etag: "\"summer\"",
                lastModified: "Mon, 01 Jun 2026 09:00:00 GMT", cacheControl: "max-age=2"))
        let before = await Self.run(pipeline, url)
        #expect(before.outcome.attachment?.url == spring.outcome.attachment?.url, "still fresh: the old banner")

        clock.advance(by: .seconds(2))
        let summer = await Self.run(pipeline, url)
        #expect(summer.outcome.status == .processed)
        #expect(summer.outcome.cacheHit == false)
        #expect(summer.outcome.revalidated == nil)
        #expect(summer.outcome.sourceMIME == "image/webp")
        #expect(summer.outcome.attachment?.url != spring.outcome.attachment?.url)
        #expect(origin.notModified("/banner.jpg") == 0)
        let cached = await Self.run(pipeline, url)
        #expect(cached.outcome.attachment?.url == summer.outcome.attachment?.url && cached.outcome.cacheHit == true)
    }

    @Test func withoutValidatorsTheSameBytesRenewWithoutATranscode() async throws {
        let origin = try TestOrigin()
        origin.route("/plain.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        let store = TemporaryDirectory()
        let clock = TestClock()
        let pipeline = try Self.pipeline(store, clock: clock)
        let url = origin.url("/plain.jpg")
        let made = await Self.run(pipeline, url)
        #expect(made.outcome.status == .processed)
        #expect((await Self.run(pipeline, url)).outcome.cacheHit == true, "fresh for --min-ttl")

        clock.advance(by: .seconds(1))  // --min-ttl 1s: nothing said, the minimum
        let renewed = await Self.run(pipeline, url)
        #expect(origin.hits("/plain.jpg") == 2, "no validators: fetched again in full")
        #expect(renewed.outcome.revalidated == true, "the same bytes: nothing to transcode")
        #expect(renewed.outcome.timingsMs.transcode == 0)
        #expect(renewed.outcome.attachment?.url == made.outcome.attachment?.url)
    }

    @Test func refreshAsksTheOriginAtOnce() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/hero.jpg",
            .cacheable(
                body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg", etag: "\"a\"",
                lastModified: nil, cacheControl: "max-age=3600"))
        let store = TemporaryDirectory()
        let pipeline = try Self.pipeline(store)
        let url = origin.url("/hero.jpg")
        _ = await Self.run(pipeline, url)
        let refreshed = await Self.run(pipeline, url, refresh: true)
        #expect(origin.hits("/hero.jpg") == 2)
        #expect(origin.notModified("/hero.jpg") == 1)
        #expect(refreshed.outcome.revalidated == true)

        origin.route(
            "/hero.jpg",
            .cacheable(
                body: try sampleMedia("logo-alpha.png"), contentType: "image/png", etag: "\"b\"",
                lastModified: nil, cacheControl: "max-age=3600"))
        let plain = await Self.run(pipeline, url)
        #expect(plain.outcome.sourceMIME == "image/jpeg", "fresh for an hour without refresh")
        let changed = await Self.run(pipeline, url, refresh: true)
        #expect(changed.outcome.sourceMIME == "image/png")
        #expect(changed.outcome.attachment?.url != plain.outcome.attachment?.url)
    }

    @Test func aStaleEntrySurvivesAnOriginOutageButNotA404() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/hero.jpg",
            .cacheable(
                body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg", etag: "\"a\"",
                lastModified: nil, cacheControl: "max-age=1"))
        let store = TemporaryDirectory()
        let clock = TestClock()
        let pipeline = try Self.pipeline(store, clock: clock)
        let url = origin.url("/hero.jpg")
        let made = await Self.run(pipeline, url)
        #expect(made.outcome.status == .processed)

        origin.route("/hero.jpg", .status(503, body: "maintenance"))
        clock.advance(by: .seconds(1))
        let down = await Self.run(pipeline, url)
        #expect(down.outcome.status == .bestAttempt)
        #expect(down.outcome.reason == "stale")
        #expect(down.outcome.message?.contains("HTTP 503") == true)
        #expect(down.outcome.attachment?.url == made.outcome.attachment?.url)
        #expect(down.payload["image_url"]?.stringValue == made.outcome.attachment?.url)
        #expect(down.descriptor?["status"] == .string("best_attempt"))

        origin.route("/hero.jpg", .status(404, body: "gone"))
        let gone = await Self.run(pipeline, url)
        #expect(gone.outcome.status == .rejected)
        #expect(gone.outcome.reason == "http_404")
        #expect(gone.payload["aps"] != nil)
    }

    @Test func purgeForgetsAURL() async throws {
        let origin = try TestOrigin()
        origin.route("/hero.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        let store = TemporaryDirectory()
        let pipeline = try Self.pipeline(store, minTTL: .seconds(3600))
        let url = origin.url("/hero.jpg")
        _ = await Self.run(pipeline, url)
        #expect((await Self.run(pipeline, url)).outcome.cacheHit == true)

        let purged = try await pipeline.purge(urls: [url, origin.url("/never-seen.jpg")])
        #expect(purged.map(\.keys.count) == [1, 0] && purged.map(\.searched) == [false, true])
        let after = await Self.run(pipeline, url)
        #expect(after.outcome.cacheHit == false)
        #expect(origin.hits("/hero.jpg") == 2)

        // With settings that change the options (so the keys), the entry is found by reading the
        // index for the entries made from the URL.
        var other = testConfig(store: store)
        other.allowPrivateNetworks = false
        other.thumbnailHidden = true
        let elsewhere = try Pipeline(config: other)
        #expect(Set(elsewhere.cacheKeys(url: url)).isDisjoint(with: pipeline.cacheKeys(url: url)))
        let found = try await elsewhere.purge(urls: [url])
        #expect(found.map(\.keys.count) == [1] && found.map(\.searched) == [true])
        // Gone from the index: a process that reads it (another node, or this one after
        // --index-cache-ttl) fetches again.
        let next = try Self.pipeline(store, minTTL: .seconds(3600))
        #expect((await Self.run(next, url)).outcome.cacheHit == false)
        #expect(origin.hits("/hero.jpg") == 3)
    }
}
