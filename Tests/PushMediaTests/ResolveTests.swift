import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// The one way from a media request to its resolution (`Pipeline.resolve`), which every door
/// maps to its own answer: each way it can end, with a real origin on 127.0.0.1, real libcurl
/// and libvips, a real store; lifetimes run on a clock the test moves.
@Suite("Resolve", .serialized)
struct ResolveTests {
    let origin: TestOrigin
    let clock = TestClock()

    init() throws {
        origin = try TestOrigin()
    }

    /// The resolution's case, and the entry or progress it carries.
    enum Ended: Equatable {
        case ready(cacheHit: Bool)
        case renewed, stale
        case failed(String)
        case notReady(started: Bool)
        case overloaded, storeUnavailable
    }

    static func ended(_ resolution: Pipeline.Resolution) -> Ended {
        switch resolution {
        case let .ready(_, cacheHit): .ready(cacheHit: cacheHit)
        case .renewed: .renewed
        case .stale: .stale
        case let .failed(reason, _, _): .failed(reason)
        case let .notReady(progress): .notReady(started: progress.started)
        case .overloaded: .overloaded
        case .storeUnavailable: .storeUnavailable
        }
    }

    func pipeline(_ adjust: (inout PushMediaConfig) -> Void = { _ in }) throws -> Pipeline {
        var config = testConfig(store: TemporaryDirectory())
        config.minTTL = .seconds(1)
        adjust(&config)
        return try Pipeline(config: config, clock: clock.wall)
    }

    func request(
        _ pipeline: Pipeline, _ path: String, within budget: Duration = .seconds(10), refresh: Bool = false
    ) throws -> Pipeline.MediaRequest {
        let url = origin.url(path)
        let source = try pipeline.remoteSource(url, trimmed: url).get()
        return Pipeline.MediaRequest(
            key: MediaStore.cacheKey(source: source.identity, options: pipeline.optionsFingerprint), source: source,
            profile: .ios, posterTime: nil, refresh: refresh, deadline: .now + budget, alternate: nil)
    }

    func resolve(
        _ pipeline: Pipeline, _ path: String, within budget: Duration = .seconds(10), refresh: Bool = false
    ) async throws -> Pipeline.Resolution {
        await pipeline.resolve(try request(pipeline, path, within: budget, refresh: refresh)).0
    }

    /// `/hero.jpg`, a JPEG its origin says is fresh for a second, with an ETag to revalidate it.
    func serveHeroFreshForASecond() throws {
        origin.route(
            "/hero.jpg",
            .cacheable(
                body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg", etag: "\"a\"", lastModified: nil,
                cacheControl: "max-age=1"))
    }

    @Test func madeThenFromTheStoreThenRenewedWithTheOrigin() async throws {
        try serveHeroFreshForASecond()
        let pipeline = try pipeline()
        #expect(Self.ended(try await resolve(pipeline, "/hero.jpg")) == .ready(cacheHit: false))
        #expect(Self.ended(try await resolve(pipeline, "/hero.jpg")) == .ready(cacheHit: true))
        #expect(origin.hits("/hero.jpg") == 1)
        clock.advance(by: .seconds(1))
        #expect(Self.ended(try await resolve(pipeline, "/hero.jpg")) == .renewed)
        #expect(origin.notModified("/hero.jpg") == 1)
    }

    @Test func aFailingOriginWithAStaleEntryServesTheStaleEntryButA404DoesNot() async throws {
        try serveHeroFreshForASecond()
        let pipeline = try pipeline()
        #expect(Self.ended(try await resolve(pipeline, "/hero.jpg")) == .ready(cacheHit: false))
        origin.route("/hero.jpg", .status(503, body: "maintenance"))
        clock.advance(by: .seconds(1))
        let down = try await resolve(pipeline, "/hero.jpg")
        #expect(Self.ended(down) == .stale)
        if case let .stale(_, why) = down { #expect(why.contains("revalidating with the origin failed")) }
        origin.route("/hero.jpg", .status(404, body: "gone"))
        #expect(Self.ended(try await resolve(pipeline, "/hero.jpg")) == .failed("http_404"))
    }

    @Test func aStalledJobIsNotReadyAndGoesOnForTheNextRequest() async throws {
        origin.route(
            "/slow.webp", .delayed(.milliseconds(1500), body: try sampleMedia("banner.webp"), contentType: "image/webp")
        )
        // As `serve` runs it: a job goes on past its request's budget.
        let pipeline = try pipeline {
            $0.backgroundLimit = .seconds(10)
            $0.minTTL = .seconds(60)
        }
        let stalled = try request(pipeline, "/slow.webp", within: .milliseconds(300))
        #expect(Self.ended(await pipeline.resolve(stalled).0) == .notReady(started: true))
        let job = try #require(pipeline.inFlight.withLock { $0[stalled.key] }, "the job ended with its request")
        guard case .ready = await job.task.value.kind else {
            Issue.record("the job did not make the media")
            return
        }
        #expect(Self.ended(try await resolve(pipeline, "/slow.webp")) == .ready(cacheHit: true))
        #expect(origin.hits("/slow.webp") == 1, "the job went on past the budget; the next request found it")
    }

    @Test func aFullQueueIsOverloadedAndAJobWaitingForASlotIsNotStarted() async throws {
        origin.route(
            "/slow.webp", .delayed(.milliseconds(1500), body: try sampleMedia("banner.webp"), contentType: "image/webp")
        )
        origin.route("/other.png", .file(body: try sampleMedia("logo-alpha.png"), contentType: "image/png"))
        origin.route("/third.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        let full = try pipeline {
            $0.maxJobs = 1
            $0.maxQueuedJobs = 0
        }
        async let running = resolve(full, "/slow.webp")
        #expect(try await eventually { full.gate?.inFlight == 1 }, "the first job never took the slot")
        let refused = try await resolve(full, "/other.png")
        #expect(Self.ended(refused) == .overloaded)
        if case let .overloaded(why) = refused { #expect(why == "1 jobs are running and 0 are queued") }
        #expect(origin.hits("/other.png") == 0)

        let queued = try pipeline {
            $0.maxJobs = 1
            $0.maxQueuedJobs = 1
        }
        async let holding = resolve(queued, "/slow.webp")
        #expect(try await eventually { queued.gate?.inFlight == 1 }, "the first job never took the slot")
        #expect(
            Self.ended(try await resolve(queued, "/third.jpg", within: .milliseconds(200)))
                == .notReady(started: false))
        #expect(Self.ended(try await running) == .ready(cacheHit: false))
        #expect(Self.ended(try await holding) == .ready(cacheHit: false))
    }

    @Test func aStoreThatCannotBeReadIsUnavailableAndNothingIsFetched() async throws {
        origin.route("/hero.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        // An object store whose endpoint refuses every connection.
        let closed = try TestOrigin()
        let endpoint = closed.url("/")
        closed.stop()
        let dead = try pipeline {
            $0.storeLocation = "s3://media/push"
            $0.s3Endpoint = endpoint
            $0.s3AccessKey = "key"
            $0.s3SecretKey = "secret"
        }
        let resolution = try await resolve(dead, "/hero.jpg", within: .seconds(5))
        #expect(Self.ended(resolution) == .storeUnavailable)
        if case let .storeUnavailable(why, progress) = resolution {
            #expect(why.hasPrefix("the store cannot be read"))
            #expect(progress?.started == nil, "no job ran")
        }
        #expect(origin.hits("/hero.jpg") == 0)
    }
}
