import PushMediaTestSupport
import Testing

@testable import PushMedia

@Suite("Locate and rewrite")
struct RewriteTests {
    /// The top-level key of the generic shape's media reference, as the pipeline finds it.
    func located(_ payload: JSONObject, extraKeys: [String] = []) -> String? {
        let slots = Vendor.generic.slots(in: payload, extraKeys: extraKeys, profile: .ios)
        #expect(slots.count <= 1)
        guard let slot = slots.first, case let .key(key)? = slot.target.steps.first, slot.target.steps.count == 1 else {
            return nil
        }
        #expect(slot.value == payload[key])
        return key
    }

    /// Rewrites the generic shape's media reference (`media_url` in these payloads) as the pipeline does.
    func rewrite(
        _ payload: JSONObject, media: PayloadRewriter.Media,
        descriptor: Descriptor?
    ) -> PayloadRewriter.Rewritten? {
        let slots = Vendor.generic.slots(in: payload, extraKeys: [], profile: .ios)
        #expect(slots.map(\.target) == [JSONPath(keys: "media_url")])
        let edits = slots.map { PayloadRewriter.Edit(slot: $0, media: media) }
        return PayloadRewriter.rewrite(payload, edits: edits, vendor: .generic, descriptor: descriptor)
    }

    @Test func firstBuiltInKeyWinsThenExtraKeys() {
        let both = payload([("image_url", .string("b")), ("media_url", .string("a"))])
        #expect(located(both) == "media_url")
        // posterImageURL (a common NSE tutorial's key) is built in; other keys need --media-key.
        #expect(located(payload([("posterImageURL", .string("p"))])) == "posterImageURL")
        let posterAndAttachment = payload([("posterImageURL", .string("p")), ("attachment-url", .string("a"))])
        #expect(located(posterAndAttachment) == "attachment-url")
        let extra = payload([("heroImage", .string("p"))])
        #expect(located(extra) == nil)
        #expect(located(extra, extraKeys: ["heroImage"]) == "heroImage")
    }

    @Test func alertDetection() {
        let generic = Vendor.generic
        #expect(generic.hasAlert(payload([])))
        #expect(!generic.hasAlert(payload([], alert: false)))
        #expect(generic.hasAlert(JSONObject([("aps", .object(JSONObject([("alert", .string("Hi"))])))])))
        #expect(!generic.hasAlert(JSONObject([("aps", .object(JSONObject([("alert", .string(""))])))])))
    }

    @Test func replacesURLSetsMutableContentAndKeepsEverythingElse() throws {
        var aps = JSONObject()
        aps["alert"] = .string("Sale")
        aps["sound"] = .string("default")
        let input = JSONObject([
            ("aps", .object(aps)), ("media_url", .string("http://x/y")), ("n", .number("1.50")),
            ("nested", .object(JSONObject([("k", .array([.null, .bool(true)]))]))),
        ])
        let descriptor = Descriptor(
            status: .processed, type: "public.jpeg", mime: "image/jpeg", bytes: 10, width: 4, height: 3,
            thumb: "https://t/x.jpg")
        let out = try #require(rewrite(input, media: .replace(with: "https://cdn/a.jpg"), descriptor: descriptor))
        #expect(out.payload["media_url"] == .string("https://cdn/a.jpg"))
        #expect(out.payload["aps"]?.objectValue?["mutable-content"] == .number("1"))
        #expect(out.payload["aps"]?.objectValue?["sound"] == .string("default"))
        #expect(out.payload["n"] == .number("1.50"))
        #expect(out.payload["nested"] == input["nested"])
        #expect(out.payload.keys == ["aps", "media_url", "n", "nested", "pushmedia"])
        let d = try #require(out.payload["pushmedia"]?.objectValue)
        #expect(d["v"] == .number("1"))
        #expect(d["type"] == .string("public.jpeg"))
        #expect(d["thumb"] == .string("https://t/x.jpg"))
        #expect(out.bytes == JSONValue.object(out.payload).serialized())
        #expect(out.droppedFields.isEmpty)
    }

    @Test func dropsOptionalDescriptorFieldsToFitTheLimit() throws {
        let input = payload([
            ("media_url", .string("http://x/y")), ("pad", .string(String(repeating: "x", count: 3_800))),
        ])
        let descriptor = Descriptor(
            status: .processed, type: "public.jpeg", mime: "image/jpeg", bytes: 123456, width: 2048, height: 1536,
            thumb: "https://cdn.example.com/" + String(repeating: "a", count: 64) + ".jpg")
        let out = try #require(rewrite(input, media: .replace(with: "https://cdn/a.jpg"), descriptor: descriptor))
        #expect(out.bytes.count <= PayloadRewriter.apnsLimit)
        #expect(out.droppedFields.first == "thumb")
        #expect(out.payload["pad"] == input["pad"])
        #expect(out.payload["pushmedia"]?.objectValue?["status"] == .string("processed"))
    }

    @Test func returnsNilWhenEvenThePlainPayloadIsTooLarge() {
        let input = payload([
            ("media_url", .string("http://x/y")), ("pad", .string(String(repeating: "é", count: 2_100))),
        ])
        let descriptor = Descriptor(status: .processed)
        #expect(rewrite(input, media: .replace(with: "https://cdn/a.jpg"), descriptor: descriptor) == nil)
    }

    @Test func removeAndKeepTheMediaKey() throws {
        let input = payload([("media_url", .string("http://x/y"))])
        let rejected = Descriptor(status: .rejected, reason: "http_404")
        let removed = try #require(rewrite(input, media: .remove, descriptor: rejected))
        #expect(removed.payload["media_url"] == nil)
        #expect(removed.payload["pushmedia"]?.objectValue?["reason"] == .string("http_404"))
        let kept = try #require(rewrite(input, media: .keep, descriptor: nil))
        #expect(kept.payload == input)
    }

    @Test func anInputDescriptorNeverOutlivesTheRewrite() throws {
        var input = payload([("media_url", .string("http://x/y")), ("pushmedia", .number("1"))])
        let room = PayloadRewriter.apnsLimit - JSONValue.object(input).serialized().count - #","pad":"""#.count - 10
        input["pad"] = .string(String(repeating: "x", count: room))
        let out = try #require(
            rewrite(
                input, media: .replace(with: "https://cdn/a.jpg"),
                descriptor: Descriptor(status: .processed, type: "public.jpeg")))
        #expect(out.droppedFields.last == "pushmedia")
        #expect(out.payload["pushmedia"] == nil)
    }
}
