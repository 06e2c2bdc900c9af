import Foundation
import Testing
@testable import PushMedia

@Suite("Outcome JSON")
struct OutcomeJSONTests {
    /// The hand-written encoding is what JSONEncoder (sorted keys) writes for the Codable form.
    @Test(arguments: [false, true])
    func matchesTheCodableForm(full: Bool) throws {
        var outcome = Outcome(status: .processed)
        outcome.timingsMs.total = 12.5
        outcome.timingsMs.fetch = 3
        if full {
            outcome = Outcome(status: .rejected, reason: "http_404", message: "p.json: https://x/\"é\"/a b: not found\n")
            outcome.mediaKey = "ab.att.url"
            outcome.sourceURL = "https://x.example/a?b=c&d=/e"
            outcome.sourceMIME = "image/webp"
            outcome.sourceBytes = 123_456_789_012
            let info = AttachmentInfo(url: "https://cdn/m/a.jpg", mime: "image/jpeg", uti: "public.jpeg", bytes: 42, width: 2048, height: 1024)
            outcome.attachment = info
            outcome.thumbnail = AttachmentInfo(url: "https://cdn/m/t.jpg", mime: "image/jpeg", uti: nil, bytes: 7, width: nil, height: nil)
            outcome.payloadBytes = 4096
            outcome.cacheHit = false
            outcome.warnings = ["one", "two \u{1F600}"]
            outcome.timingsMs = StageTimings()
            outcome.timingsMs.total = 1234.5
            outcome.timingsMs.transcode = 0.1
            outcome.vendor = "airship"
            var entry = MediaOutcome(path: "urls[0].url", platform: "ios", status: .processed)
            entry.attachment = info
            entry.icon = info
            entry.hints = ThumbnailHints(clip: ClipRect(x: 0.125, y: 0, width: 0.75, height: 1), hidden: true, frame: 3, time: 2.5)
            entry.cacheHit = true
            var other = MediaOutcome(path: "urls[1].url", platform: "android", status: .rejected)
            other.reason = "too_large"
            other.message = "m"
            other.sourceBytes = 5
            outcome.media = [entry, other]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let expected = try JSONValue.parse(Array(try encoder.encode(outcome)))
        let written = outcome.jsonValue.serialized()
        #expect(try JSONValue.parse(written) == expected.numbersNormalized)
        #expect(outcome.jsonValue == expected.numbersNormalized)
    }
}

extension JSONValue {
    /// Numbers spelled as Double's shortest form (JSONEncoder writes `3.0` as `3`).
    var numbersNormalized: JSONValue {
        switch self {
        case let .number(text): Double(text).map { JSONValue.number($0) } ?? self
        case let .array(items): .array(items.map(\.numbersNormalized))
        case let .object(object): .object(JSONObject(object.members.map { ($0.key, $0.value.numbersNormalized) }))
        default: self
        }
    }
}
