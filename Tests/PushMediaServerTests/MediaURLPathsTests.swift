import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// The answer memo of media URLs (`MediaURLPaths`): an answer given again for a second, and what
/// ends it sooner.
extension MediaURLRouteTests {
    /// A cached answer is given again for a second without the signature's check or the
    /// pipeline; a reload of the keys or a purge is seen all the same.
    @Test func aKeptAnswerFollowsKeyReloadsAndPurges() async throws {
        let rotated = try #require(MediaURLKey(hexKey: "00ff", hexSalt: "ff00"))
        let clock = TestClock()
        let server = try server(
            urls: {
                $0.keys.append("00ff")
                $0.salts.append("ff00")
            }, clock: clock)
        let source = origin.url("/photo.jpg")
        let (good, old) = (Self.signed(source, key: Self.testKey), Self.signed(source, key: rotated))
        try await server.test { client in
            for outcome in ["processed", "processed/cache", "processed/cache"] {
                try await client.execute(uri: old, method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(Self.header(response, "X-PushMedia-Outcome") == outcome)
                }
            }
            // The old key is withdrawn: its URL, answered a moment ago, is refused at once.
            var reloaded = server.parts.server
            reloaded.urls.keys = [Self.key]
            reloaded.urls.salts = [Self.salt]
            try server.parts.live.update(reloaded)
            try await client.execute(uri: old, method: .get) { response in
                #expect(response.status == .forbidden)
                #expect(Self.errorCode(response) == "invalid_signature")
            }
            try await client.execute(uri: good, method: .get) { response in
                #expect(response.status == .ok)
                #expect(Self.header(response, "X-PushMedia-Outcome") == "processed/cache")
            }
            // Purged: once the kept answer's second is over, the next request makes the file again.
            let purged = try await server.parts.pipeline.purge(urls: [source])
            #expect(purged.first?.keys.isEmpty == false)
            clock.advance(by: MediaURLPaths.recheck)
            try await client.execute(uri: good, method: .get) { response in
                #expect(response.status == .ok)
                #expect(Self.header(response, "X-PushMedia-Outcome") == "processed")
            }
        }
        #expect(origin.hits("/photo.jpg") == 2)
    }

    /// What the memo gives: the answer kept under the same settings for a second, nothing after
    /// it, under other settings, or with answers not kept (`--memo-bytes 0`).
    @Test func theMemoKeepsAnAnswerASecondUnderItsSettings() throws {
        let server = try server()
        let path = "/insecure/pr:ios/plain/https://cdn.example/a.jpg@jpg"
        let url = try MediaURL.parse(path)
        let answer = MediaURLPaths.Answer(
            file: "f.jpg", headers: [.pushMediaOutcome: "processed/cache"], freshUntil: nil,
            counted: server.parts.metrics.mediaURLCounter(profile: "ios", outcome: "cache"))
        let names = MediaURLPaths.Names(asked: "a.jpg", preview: "a.jpg")
        let now = ContinuousClock.now
        for keeps in [true, false] {
            let memo = MediaURLPaths(keepsAnswers: keeps)
            memo.keep(path, answer: answer, generation: 3, now: now)
            #expect(memo.answer(path, generation: 3, now: now) == nil, "a path not parsed is not kept")
            memo.remember(path, url: url, names: names)
            #expect(memo.parsed(path)?.1.asked == "a.jpg")
            memo.keep(path, answer: answer, generation: 3, now: now)
            #expect((memo.answer(path, generation: 3, now: now + .milliseconds(999))?.file == "f.jpg") == keeps)
            #expect(memo.answer(path, generation: 3, now: now + MediaURLPaths.recheck) == nil)
            #expect(memo.answer(path, generation: 4, now: now) == nil)
            #expect(memo.answer(path + "x", generation: 3, now: now) == nil)
        }
    }
}
