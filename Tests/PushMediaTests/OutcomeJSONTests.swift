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
            outcome = Outcome(
                status: .rejected, reason: "http_404", message: "p.json: https://x/\"é\"/a b: not found\n")
            outcome.mediaKey = "ab.att.url"
            outcome.sourceURL = "https://x.example/a?b=c&d=/e"
            outcome.sourceMIME = "image/webp"
            outcome.sourceBytes = 123_456_789_012
            let info = AttachmentInfo(
                url: "https://cdn/m/a.jpg", mime: "image/jpeg", uti: "public.jpeg", bytes: 42, width: 2048, height: 1024
            )
            outcome.attachment = info
            outcome.thumbnail = AttachmentInfo(
                url: "https://cdn/m/t.jpg", mime: "image/jpeg", uti: nil, bytes: 7, width: nil, height: nil)
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
            entry.hints = ThumbnailHints(
                clip: ClipRect(x: 0.125, y: 0, width: 0.75, height: 1), hidden: true, frame: 3, time: 2.5)
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
        // And it reads back as the same outcome.
        #expect(try JSONDecoder().decode(Outcome.self, from: try encoder.encode(outcome)) == outcome)
        // Split where the total goes, it is the same bytes around the total.
        let (head, tail) = outcome.serializedAroundTotal()
        #expect(head + JSONValue.number(outcome.timingsMs.total).serialized() + tail == written)
    }

    /// The primary reference is written flat at the top level: its path as `media_key`, beside the
    /// payload's own fields; its platform, icon and hints only in `media`.
    @Test func thePrimaryReferenceIsWrittenFlat() throws {
        var primary = MediaOutcome(path: "message.apns.fcm_options.image", platform: "ios", status: .processed)
        primary.sourceURL = "https://x.example/a.heic"
        primary.sourceMIME = "image/heic"
        primary.sourceBytes = 300_000
        primary.attachment = AttachmentInfo(
            url: "https://cdn/m/a.jpg", mime: "image/jpeg", uti: "public.jpeg",
            bytes: 42, width: 2048, height: 1536)
        primary.icon = primary.attachment
        primary.hints = ThumbnailHints(hidden: true)
        primary.cacheHit = true
        primary.revalidated = true
        var outcome = Outcome(status: .skipped)
        #expect(outcome.mediaKey == nil)
        outcome.primary = primary
        outcome.vendor = "fcm"
        outcome.media = [primary]
        let object = try #require(outcome.jsonValue.objectValue)
        #expect(
            object.keys == [
                "attachment", "cache_hit", "media", "media_key", "payload_bytes", "revalidated",
                "source_bytes", "source_mime", "source_url", "status", "timings_ms", "vendor",
            ])
        #expect(object["media_key"] == .string("message.apns.fcm_options.image"))
        #expect(object["status"] == .string("processed"))
        #expect(outcome.mediaKey == primary.path && outcome.attachment == primary.attachment)
        #expect(outcome.cacheHit == true && outcome.revalidated == true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let encoded = try JSONValue.parse(Array(try encoder.encode(outcome)))
        #expect(outcome.jsonValue == encoded.numbersNormalized)
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
