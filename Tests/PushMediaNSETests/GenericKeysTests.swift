import Foundation
import PushMedia
import PushMediaNSE
import Testing

/// The generic top-level media keys are listed twice, on the server (`MediaLocator.builtInKeys`)
/// and on the phone (`MediaURLLocator.genericKeys`, which cannot depend on the server library):
/// the two lists stay the same, and both sides pick the same key.
@Suite("Generic media keys")
struct GenericKeysTests {
    @Test func theServerAndThePhoneListTheSameKeysInTheSameOrder() {
        #expect(MediaURLLocator.genericKeys == MediaLocator.builtInKeys)
    }

    @Test(arguments: MediaLocator.builtInKeys)
    func bothSidesFindTheKey(_ key: String) throws {
        let url = "https://cdn.example.com/\(key).jpg"
        let payload = JSONObject([("aps", .object(JSONObject([("alert", .string("Hi"))]))), (key, .string(url))])
        let slots = Vendor.generic.slots(in: payload, extraKeys: [], profile: .ios)
        #expect(slots.map(\.target.description) == [key])
        let found = try MediaURLLocator.attachmentURL(in: [key: url], descriptor: nil)
        #expect(found?.path == key && found?.url.absoluteString == url)
    }

    @Test func withEveryKeyPresentBothSidesTakeTheFirstOfTheList() throws {
        // Written in reverse, so that the payload's own order cannot decide.
        let keys = MediaLocator.builtInKeys.reversed()
        let payload = JSONObject(keys.map { ($0, JSONValue.string("https://cdn.example.com/\($0).jpg")) })
        let userInfo: [AnyHashable: Any] = Dictionary(
            uniqueKeysWithValues: keys.map {
                (AnyHashable($0), "https://cdn.example.com/\($0).jpg")
            })
        let first = try #require(MediaLocator.builtInKeys.first)
        #expect(Vendor.generic.slots(in: payload, extraKeys: [], profile: .ios).map(\.target.description) == [first])
        #expect(try MediaURLLocator.attachmentURL(in: userInfo, descriptor: nil)?.path == first)
    }
}
