import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

@Suite("Decode memory budget")
struct DecodeBudgetTests {
    @Test func waitsUntilTheReservationFitsThenAdmitsInOrder() async throws {
        let budget = DecodeBudget(limit: 100)
        let far = ContinuousClock.now + .seconds(30)
        let first = try #require(await budget.reserve(50, until: far))
        #expect(budget.reserved == 50)
        let order = Locked<[String]>([])
        let second = Task { () -> Int64? in
            let held = await budget.reserve(60, until: far)
            order.withLock { $0.append("second") }
            return held
        }
        // The third arrives only once the second is in the queue.
        #expect(try await eventually { budget.waiting == 1 }, "the second never queued")
        let third = Task { () -> Int64? in
            let held = await budget.reserve(45, until: far)
            order.withLock { $0.append("third") }
            return held
        }
        // 45 would fit beside 50, but the second came first: the third queues behind it.
        #expect(try await eventually { budget.waiting == 2 || !order.withLock { $0 }.isEmpty })
        #expect(order.withLock { $0 }.isEmpty && budget.reserved == 50 && budget.waiting == 2)
        budget.release(first)
        let heldSecond = try #require(await second.value)
        #expect(budget.reserved == 60)
        // 60 + 45 does not fit: the third still waits, and only the second has been admitted.
        #expect(budget.waiting == 1)
        #expect(order.withLock { $0 } == ["second"])
        budget.release(heldSecond)
        let heldThird = try #require(await third.value)
        #expect(order.withLock { $0 } == ["second", "third"])
        #expect(budget.reserved == 45)
        budget.release(heldThird)
        #expect(budget.reserved == 0)
    }

    @Test func aReservationLargerThanTheBudgetRunsAloneAndAWaitCanExpire() async throws {
        let budget = DecodeBudget(limit: 100)
        let held = try #require(await budget.reserve(5_000, until: .now + .seconds(5)))
        #expect(held == 100)
        let start = ContinuousClock.now
        #expect(await budget.reserve(1, until: .now + .milliseconds(100)) == nil)
        #expect(ContinuousClock.now - start < .seconds(5))
        budget.release(held)
        #expect(await budget.reserve(1, until: .now + .milliseconds(100)) == 1)
    }

    @Test func estimatesFollowTheLoader() throws {
        let transcoder = Transcoder(config: PushMediaConfig())
        let jpeg = ImageHeader(
            width: 8000, height: 6000, frames: 1, hasAlpha: false, orientation: 1, loader: "jpegload")
        let webp = ImageHeader(
            width: 8000, height: 6000, frames: 1, hasAlpha: false, orientation: 1, loader: "webpload")
        let heif = ImageHeader(
            width: 8000, height: 6000, frames: 1, hasAlpha: false, orientation: 1, loader: "heifload")
        // JPEG decodes at 1/2 here (8000 / 2048 < 4): a quarter of the pixels.
        #expect(transcoder.decodeMemory(jpeg) == 48_000_000 / 4 * 4 + 2048 * 2048 * 4)
        #expect(transcoder.decodeMemory(webp) == 48_000_000 * 4 + 2048 * 2048 * 4)
        #expect(transcoder.decodeMemory(heif) == 2 * 48_000_000 * 4 + 2048 * 2048 * 4)
    }

    @Test func jobsStillFinishUnderABudgetSmallerThanOneDecode() async throws {
        let origin = try TestOrigin()
        let store = TemporaryDirectory()
        var config = testConfig(store: store)
        config.decodeMemory = 1_000_000
        let pipeline = try Pipeline(config: config)
        for name in ["photo-exif.jpg", "banner.webp", "portrait.heic"] {
            origin.route("/" + name, .file(body: try sampleMedia(name), contentType: "application/octet-stream"))
        }
        let results = await withTaskGroup(of: PipelineResult.self) { group in
            for name in ["photo-exif.jpg", "banner.webp", "portrait.heic"] {
                group.addTask { await pipeline.process(payload([("media_url", .string(origin.url("/" + name)))])) }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.outcome.status == .processed })
        #expect(pipeline.decodeBudget.reserved == 0)
    }
}
