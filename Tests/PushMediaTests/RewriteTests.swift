import Testing
@testable import PushMedia
import PushMediaTestSupport

@Suite("Locate and rewrite")
struct RewriteTests {
    @Test func firstBuiltInKeyWinsThenExtraKeys() {
        let both = payload([("image_url", .string("b")), ("media_url", .string("a"))])
        #expect(MediaLocator.locate(in: both)?.key == "media_url")
        // posterImageURL (a common NSE tutorial's key) is built in; other keys need --media-key.
        #expect(MediaLocator.locate(in: payload([("posterImageURL", .string("p"))]))?.key == "posterImageURL")
        #expect(MediaLocator.locate(in: payload([("posterImageURL", .string("p")), ("attachment-url", .string("a"))]))?.key == "attachment-url")
        let extra = payload([("heroImage", .string("p"))])
        #expect(MediaLocator.locate(in: extra) == nil)
        #expect(MediaLocator.locate(in: extra, extraKeys: ["heroImage"])?.key == "heroImage")
    }

    @Test func alertDetection() {
        #expect(MediaLocator.hasAlert(payload([])))
        #expect(!MediaLocator.hasAlert(payload([], alert: false)))
        #expect(MediaLocator.hasAlert(JSONObject([("aps", .object(JSONObject([("alert", .string("Hi"))])))])))
        #expect(!MediaLocator.hasAlert(JSONObject([("aps", .object(JSONObject([("alert", .string(""))])))])))
    }

    @Test func replacesURLSetsMutableContentAndKeepsEverythingElse() throws {
        var aps = JSONObject()
        aps["alert"] = .string("Sale")
        aps["sound"] = .string("default")
        let input = JSONObject([("aps", .object(aps)), ("media_url", .string("http://x/y")), ("n", .number("1.50")),
                                ("nested", .object(JSONObject([("k", .array([.null, .bool(true)]))])))])
        let descriptor = Descriptor(status: .processed, type: "public.jpeg", mime: "image/jpeg", bytes: 10, width: 4, height: 3, thumb: "https://t/x.jpg")
        let out = try #require(PayloadRewriter.rewrite(input, mediaKey: "media_url", media: .replace(with: "https://cdn/a.jpg"), descriptor: descriptor))
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
        let input = payload([("media_url", .string("http://x/y")), ("pad", .string(String(repeating: "x", count: 3_800)))])
        let descriptor = Descriptor(status: .processed, type: "public.jpeg", mime: "image/jpeg", bytes: 123456, width: 2048, height: 1536,
                                    thumb: "https://cdn.example.com/" + String(repeating: "a", count: 64) + ".jpg")
        let out = try #require(PayloadRewriter.rewrite(input, mediaKey: "media_url", media: .replace(with: "https://cdn/a.jpg"), descriptor: descriptor))
        #expect(out.bytes.count <= PayloadRewriter.apnsLimit)
        #expect(out.droppedFields.first == "thumb")
        #expect(out.payload["pad"] == input["pad"])
        #expect(out.payload["pushmedia"]?.objectValue?["status"] == .string("processed"))
    }

    @Test func returnsNilWhenEvenThePlainPayloadIsTooLarge() {
        let input = payload([("media_url", .string("http://x/y")), ("pad", .string(String(repeating: "é", count: 2_100)))])
        #expect(PayloadRewriter.rewrite(input, mediaKey: "media_url", media: .replace(with: "https://cdn/a.jpg"),
                                        descriptor: Descriptor(status: .processed)) == nil)
    }

    @Test func removeAndKeepTheMediaKey() throws {
        let input = payload([("media_url", .string("http://x/y"))])
        let removed = try #require(PayloadRewriter.rewrite(input, mediaKey: "media_url", media: .remove, descriptor: Descriptor(status: .rejected, reason: "http_404")))
        #expect(removed.payload["media_url"] == nil)
        #expect(removed.payload["pushmedia"]?.objectValue?["reason"] == .string("http_404"))
        let kept = try #require(PayloadRewriter.rewrite(input, mediaKey: "media_url", media: .keep, descriptor: nil))
        #expect(kept.payload == input)
    }

    @Test func anInputDescriptorNeverOutlivesTheRewrite() throws {
        var input = payload([("media_url", .string("http://x/y")), ("pushmedia", .number("1"))])
        let room = PayloadRewriter.apnsLimit - JSONValue.object(input).serialized().count - #","pad":"""#.count - 10
        input["pad"] = .string(String(repeating: "x", count: room))
        let out = try #require(PayloadRewriter.rewrite(input, mediaKey: "media_url", media: .replace(with: "https://cdn/a.jpg"),
                                                       descriptor: Descriptor(status: .processed, type: "public.jpeg")))
        #expect(out.droppedFields.last == "pushmedia")
        #expect(out.payload["pushmedia"] == nil)
    }
}
