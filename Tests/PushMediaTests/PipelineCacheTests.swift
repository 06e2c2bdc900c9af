import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// The pipeline's budget, cache and shared jobs: the best attempt on time, entries remembered,
/// recorded late or shared by concurrent requests.
extension PipelineTests {
    @Test func budgetExpiryAnswersOnTimeWithTheBestAttempt() async throws {
        origin.route("/drip.jpg", .drip(contentType: "image/jpeg", bytesPerSecond: 1, total: 10_000))
        let pipeline = try pipeline(budget: .seconds(1))
        let input = payload([("media_url", .string(origin.url("/drip.jpg")))])
        let start = ContinuousClock.now
        let result = await pipeline.process(input)
        let elapsed = ContinuousClock.now - start
        #expect(result.outcome.status == .bestAttempt)
        #expect(result.outcome.reason == "budget_exceeded")
        #expect(elapsed >= .seconds(1) && elapsed < .seconds(1) + lateness, "answered after \(elapsed)")
        #expect(result.payload == input)
    }

    /// A request whose index lookup missed just before a job recorded its entry, and that asks
    /// for the job only after the job has ended, takes the entry: no second fetch. One asking
    /// for a refresh still fetches.
    @Test func anEntryRecordedAfterTheLookupMissedIsTaken() async throws {
        let pipeline = try pipeline()
        let first = try await run("banner.webp", at: "/late", pipeline: pipeline)
        #expect(first.outcome.status == .processed && origin.hits("/late") == 1)
        let source = Pipeline.Source.remote(origin.url("/late"))
        let profile = PlatformProfile.ios
        let key = MediaStore.cacheKey(
            source: source.identity, options: pipeline.fingerprints[profile.id] ?? pipeline.optionsFingerprint)
        try #require(pipeline.store.remembered(key: key) != nil, "the key the first request used")
        #expect(pipeline.inFlight.withLock { $0.isEmpty })
        func job(refresh: Bool) throws -> Pipeline.SharedJob {
            try #require(
                pipeline.sharedJob(
                    key: key, source: source, profile: profile, posterTime: nil, previous: nil, refresh: refresh,
                    deadline: .now + .seconds(10)))
        }
        guard case let .ready(entry) = try await job(refresh: false).task.value.kind else {
            Issue.record("the recorded entry was not taken")
            return
        }
        #expect(first.outcome.attachment?.url.hasSuffix("/" + entry.attachment.name) == true)
        #expect(origin.hits("/late") == 1)
        _ = try await job(refresh: true).task.value
        #expect(origin.hits("/late") == 2)
    }

    @Test func rememberedMediaIsAnsweredWithoutWaiting() async throws {
        let clock = TestClock()
        let pipeline = try pipeline(clock: clock.wall)
        origin.route("/now", .file(body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let rich = payload([("media_url", .string(origin.url("/now"))), ("title", .string("Sale"))])
        #expect(pipeline.processRemembered(rich, context: PayloadContext(), sizeAtMost: nil) == nil)
        let first = await pipeline.process(rich)
        #expect(first.outcome.status == .processed && first.outcome.cacheHit == false)

        let remembered = try #require(pipeline.processRemembered(rich, context: PayloadContext(), sizeAtMost: nil))
        let awaited = await pipeline.process(rich)
        #expect(remembered.outcome.cacheHit == true && remembered.outcome.status == .processed)
        #expect(remembered.bytes == awaited.bytes)
        #expect(remembered.outcome.attachment == first.outcome.attachment)
        #expect(origin.hits("/now") == 1)
        // A refresh, or a reference not yet known, goes the whole way.
        #expect(pipeline.processRemembered(rich, context: PayloadContext(refresh: true), sizeAtMost: nil) == nil)
        let other = payload([("media_url", .string(origin.url("/other"))), ("title", .string("Sale"))])
        #expect(pipeline.processRemembered(other, context: PayloadContext(), sizeAtMost: nil) == nil)
        // A payload with nothing to process is answered as `process` answers it.
        let plain = payload([("title", .string("no media"))])
        let skipped = try #require(pipeline.processRemembered(plain, context: PayloadContext(), sizeAtMost: nil))
        let plainAwaited = await pipeline.process(plain)
        #expect(skipped.outcome.status == .skipped && skipped.bytes == plainAwaited.bytes)
        // Its stored file gone: not remembered any more, once its files are checked again.
        try FileManager.default.removeItem(atPath: try storedPath(first.outcome.attachment?.url))
        clock.advance(by: MediaStore.checkEvery)
        #expect(pipeline.processRemembered(rich, context: PayloadContext(), sizeAtMost: nil) == nil)
    }

    @Test func secondRequestIsServedFromTheCache() async throws {
        let pipeline = try pipeline()
        let first = try await run("banner.webp", at: "/cached", pipeline: pipeline)
        let second = await pipeline.process(payload([("media_url", .string(origin.url("/cached")))]))
        #expect(first.outcome.cacheHit == false)
        #expect(second.outcome.cacheHit == true)
        #expect(second.outcome.status == .processed)
        #expect(second.outcome.attachment == first.outcome.attachment)
        #expect(origin.hits("/cached") == 1)
        // A new pipeline on the same store (a new process) hits the cache too.
        let third = await (try self.pipeline()).process(payload([("media_url", .string(origin.url("/cached")))]))
        #expect(third.outcome.cacheHit == true)
        #expect(origin.hits("/cached") == 1)
    }

    @Test func concurrentRequestsForTheSameMediaShareOneFetch() async throws {
        origin.route("/shared.heic", .file(body: try sampleMedia("portrait.heic"), contentType: "image/heic"))
        let pipeline = try pipeline()
        let url = origin.url("/shared.heic")
        let outcomes = await withTaskGroup(of: Outcome.self) { group in
            for index in 0..<6 {
                group.addTask {
                    await pipeline.process(payload([("media_url", .string(url)), ("n", .number("\(index)"))])).outcome
                }
            }
            return await group.reduce(into: [Outcome]()) { $0.append($1) }
        }
        #expect(outcomes.allSatisfy { $0.status == .processed })
        #expect(Set(outcomes.compactMap(\.attachment?.url)).count == 1)
        #expect(origin.hits("/shared.heic") == 1)
    }

    @Test func localReferencesResolveOnlyInsideTheMediaRoot() async throws {
        let pipeline = try pipeline()
        let inside = await pipeline.process(
            payload([("media_url", .string("media/chime.mp3"))]), context: PayloadContext(mediaRoot: samplesDirectory))
        #expect(inside.outcome.status == .passthrough)
        let fileURL = await pipeline.process(
            payload([("media_url", .string("file://" + samplesDirectory + "/media/bell.wav"))]),
            context: PayloadContext(mediaRoot: samplesDirectory))
        #expect(fileURL.outcome.status == .passthrough)
        let escape = await pipeline.process(
            payload([("media_url", .string("../Package.swift"))]), context: PayloadContext(mediaRoot: samplesDirectory))
        #expect(escape.outcome.reason == "path_outside_root")
        let absolute = await pipeline.process(
            payload([("media_url", .string("/etc/passwd"))]), context: PayloadContext(mediaRoot: samplesDirectory))
        #expect(absolute.outcome.reason == "path_outside_root")
    }
}
