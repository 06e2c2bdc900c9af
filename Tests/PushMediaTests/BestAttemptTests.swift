import PushMediaTestSupport
import Testing

@testable import PushMedia

/// What the answer holds when the budget runs out at each stage of a job.
@Suite("Best attempt")
struct BestAttemptTests {
    let input = payload([
        ("media_url", .string("https://origin.example/photo.webp")), ("deep_link", .string("app://a")),
    ])

    /// A response whose one media reference ended with `progress` when the budget ran out.
    struct Response {
        let input: JSONObject
        func bestAttempt(_ progress: JobProgress) -> PipelineResult {
            let slot = Vendor.generic.slots(in: input, extraKeys: [], profile: .ios)[0]
            var answer = SlotAnswer(
                slot: slot, baseURL: "https://cdn.example.com/m", onReject: .drop, label: "p.json", hidden: false)
            answer.bestAttempt(progress)
            var response = PayloadResponse(payload: input, vendor: .generic, label: "p.json")
            return response.finish([answer])
        }
    }

    func response() -> Response { Response(input: input) }

    @Test func usesTheThumbnailWhenItIsReady() {
        let webp = Sniffer.sniff(try! sampleMedia("banner.webp")[...])
        let thumbnail = StoredFile(
            name: String(repeating: "a", count: 64) + ".jpg", mime: "image/jpeg", uti: "public.jpeg", bytes: 9_000,
            width: 512, height: 341)
        let response = response()
        let result = response.bestAttempt(
            JobProgress(started: true, sniff: webp, sourceBytes: 16_824, thumbnail: thumbnail))
        #expect(result.outcome.status == .bestAttempt && result.outcome.reason == "budget_exceeded")
        #expect(result.payload["media_url"] == .string("https://cdn.example.com/m/" + thumbnail.name))
        #expect(result.descriptor?["type"] == .string("public.jpeg"))
        #expect(result.descriptor?["width"] == .number("512"))
        #expect(result.outcome.attachment?.url.hasSuffix(".jpg") == true)
        #expect(result.outcome.sourceMIME == "image/webp")
        #expect(result.payload["deep_link"] == .string("app://a"))
    }

    @Test func keepsTheOriginalURLWithTheSniffedType() {
        let response = response()
        let result = response.bestAttempt(
            JobProgress(started: true, sniff: Sniffer.sniff(try! sampleMedia("chime.mp3")[...]), sourceBytes: 16_300))
        #expect(result.payload["media_url"] == input["media_url"])
        #expect(result.descriptor?["status"] == .string("best_attempt"))
        #expect(result.descriptor?["type"] == .string("public.mp3"))
        #expect(result.outcome.attachment == nil)
    }

    @Test func leavesThePayloadUnchangedWhenNothingIsKnown() {
        let response = response()
        let result = response.bestAttempt(JobProgress(started: true))
        #expect(result.payload == input)
        #expect(result.outcome.status == .bestAttempt)
        #expect(result.outcome.reason == "budget_exceeded")
        #expect(result.outcome.message?.hasPrefix("p.json: https://origin.example/photo.webp: ") == true)
    }

    @Test func aJobThatNeverLeftTheQueueIsOverload() {
        let response = response()
        let result = response.bestAttempt(JobProgress())
        #expect(result.outcome.status == .bestAttempt)
        #expect(result.outcome.reason == "overloaded")
        #expect(result.payload == input)
    }
}
