import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaRelay
@testable import PushMediaServer

@Suite("HTTP hook routes")
struct RouterTests {
    let origin: TestOrigin

    init() throws {
        origin = try TestOrigin()
        origin.route("/photo", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        origin.route("/banner", .file(body: try sampleMedia("banner.webp"), contentType: "image/webp"))
    }

    @Test func healthAndReadiness() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.body.object?["status"] == .string("ok"))
            }
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.body.object?["checks"]?.objectValue?["libvips"] == .string("ok"))
            }
            try FileManager.default.removeItem(atPath: server.store.path + "/.incoming")
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(
                    response.body.object?["checks"]?.objectValue?["store"]?.stringValue?.contains("not writable")
                        == true)
            }
        }
    }

    /// Not ready while the download disk has less than `--min-free-space` free (a threshold
    /// over any real disk's free space stands in for a full disk).
    @Test func notReadyWhenTheDiskIsNearlyFull() async throws {
        for (minimum, expected) in [(Int64(1) << 60, HTTPResponse.Status.serviceUnavailable), (1, .ok), (0, .ok)] {
            let server = try TestServer(server: { $0.minFreeSpace = minimum })
            try await server.test { client in
                try await client.execute(uri: "/readyz", method: .get) { response in
                    #expect(response.status == expected, "min-free-space \(minimum)")
                    let disk = response.body.object?["checks"]?.objectValue?["disk"]?.stringValue
                    #expect(
                        expected == .ok ? disk == "ok" : disk?.contains("under --min-free-space") == true,
                        "\(disk ?? "no disk check")")
                }
            }
        }
    }

    @Test func processReturnsThePayloadAndTheOutcome() async throws {
        let server = try TestServer()
        let url = origin.url("/photo")
        try await server.test { client in
            try await client.execute(
                uri: "/v1/process?budget_ms=5000", method: .post,
                body: ByteBuffer(json: payloadJSON(url, extra: #","n":1.0"#))
            ) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
                #expect(response.headers[HTTPField.Name("X-PushMedia-Outcome")!] == "processed")
                let body = try #require(response.body.object)
                let payload = try #require(body["payload"]?.objectValue)
                let outcome = try #require(body["outcome"]?.objectValue)
                #expect(outcome["status"] == .string("processed"))
                let attachment = try #require(payload["media_url"]?.stringValue)
                #expect(attachment.hasPrefix("https://media.example.com/media/") && attachment.hasSuffix(".jpg"))
                #expect(payload["n"] == .number("1.0"))
                #expect(payload["pushmedia"]?.objectValue?["width"] == .number("1536"))
            }
        }
    }

    @Test func processErrors() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: #"{"aps":"#)) {
                response in
                #expect(response.status == .badRequest)
                #expect(response.body.object?["error"]?.objectValue?["code"] == .string("invalid_json"))
            }
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: "[1,2]")) { response in
                #expect(response.status == .badRequest)
                #expect(response.body.object?["error"]?.objectValue?["code"] == .string("not_an_object"))
            }
            let big = payloadJSON(
                "https://x.example/a.jpg", extra: #","pad":""# + String(repeating: "x", count: 70_000) + "\"")
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: big)) { response in
                #expect(response.status == .contentTooLarge)
                #expect(response.body.object?["error"]?.objectValue?["code"] == .string("body_too_large"))
            }
            try await client.execute(uri: "/v1/process?budget_ms=never", method: .post, body: ByteBuffer(json: "{}")) {
                response in
                #expect(response.status == .badRequest)
                #expect(response.body.object?["error"]?.objectValue?["code"] == .string("invalid_parameter"))
            }
            try await client.execute(uri: "/v1/process?on_reject=explode", method: .post, body: ByteBuffer(json: "{}"))
            { response in
                #expect(response.status == .badRequest)
            }
            // A known path with a method it does not take: 405 and Allow; an unknown path: 404.
            for (method, uri, allow) in [
                (HTTPRequest.Method.trace, "/healthz", "GET"), (.get, "/v1/process", "POST"),
                (.delete, "/media/\(String(repeating: "a", count: 64)).jpg", "GET, HEAD"),
                (.put, "/preview", "GET, POST"), (.post, "/readyz", "GET"),
            ] {
                try await client.execute(uri: uri, method: method) { response in
                    #expect(response.status == .methodNotAllowed, "\(method) \(uri)")
                    #expect(response.headers[.allow] == allow)
                    #expect(response.body.object?["error"]?.objectValue?["code"] == .string("method_not_allowed"))
                }
            }
            try await client.execute(uri: "/nowhere", method: .trace) { response in
                #expect(response.status == .notFound)
            }
            try await client.execute(uri: "/v1/process?refresh=maybe", method: .post, body: ByteBuffer(json: "{}")) {
                response in
                #expect(response.status == .badRequest)
                #expect(
                    response.body.object?["error"]?.objectValue?["message"]?.stringValue?.contains("refresh") == true)
            }
        }
    }

    @Test func repeatedBodiesAreAnsweredFromTheMemoWhileTheirFilesExist() async throws {
        let clock = TestClock()
        let server = try TestServer(clock: clock)
        let body = payloadJSON(origin.url("/photo"), extra: #","campaign":"c-9""#)
        try await server.test { client in
            var answers: [JSONObject] = []
            for _ in 0..<4 {
                try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: body)) { response in
                    #expect(response.status == .ok)
                    #expect(response.headers[HTTPField.Name("X-PushMedia-Outcome")!] == "processed")
                    answers.append(try #require(response.body.object))
                }
            }
            // The first fetched and transcoded; the second and third came from the cache (the third
            // is kept, its body being seen again); the fourth from the memo.
            #expect(server.parts.answers.given == 1)
            #expect(answers[0]["outcome"]?.objectValue?["cache_hit"] == .bool(false))
            for answer in answers.dropFirst() {
                let outcome = try #require(answer["outcome"]?.objectValue)
                #expect(outcome["cache_hit"] == .bool(true))
                #expect(
                    outcome["timings_ms"]?.objectValue?["total"]?.doubleValue.map { $0 >= 0 && $0 < 60_000 } == true)
                #expect(outcome["media"]?.arrayValue?.first?.objectValue?["cache_hit"] == .bool(true))
            }
            #expect(answers[1]["payload"] == answers[3]["payload"])
            var second = try #require(answers[1]["outcome"]?.objectValue)
            var third = try #require(answers[3]["outcome"]?.objectValue)
            second["timings_ms"] = nil
            third["timings_ms"] = nil
            #expect(second == third)
            // refresh=1 and Cache-Control: no-cache are not answered from the memo: they go to the
            // pipeline (here the entry is fresh, so it is still a cache hit).
            for (uri, headers) in [
                ("/v1/process?refresh=1", HTTPFields()), ("/v1/process", [.cacheControl: "no-cache"]),
            ] {
                try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(json: body)) {
                    response in
                    #expect(response.status == .ok)
                }
            }
            #expect(server.parts.answers.given == 1)
            // A stored file gone: once the store checks the entry's files again (at most every
            // quarter second, the one check the memo's answers go through), its answer is not
            // given; the media is made again.
            let url = try #require(answers[3]["payload"]?.objectValue?["media_url"]?.stringValue)
            let name = try #require(url.split(separator: "/").last.map(String.init))
            try FileManager.default.removeItem(atPath: server.store.file(name))
            clock.advance(by: MediaStore.checkEvery)
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: body)) { response in
                let outcome = try #require(response.body.object?["outcome"]?.objectValue)
                #expect(outcome["status"] == .string("processed") && outcome["cache_hit"] == .bool(false))
            }
            #expect(server.parts.answers.given == 1)
            #expect(FileManager.default.fileExists(atPath: server.store.file(name)))
        }
    }

    @Test func vendorShapesAndProfilePerRequest() async throws {
        let server = try TestServer()
        let url = origin.url("/banner")
        // An FCM message from a campaign tool: one variant per platform part, in the message's own shape.
        let message =
            #"{"message":{"topic":"t","notification":{"title":"Sale","body":"Now","image":"\#(url)"},"apns":{},"android":{}}}"#
        try await server.test { client in
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: message)) { response in
                let body = try #require(response.body.object)
                let outcome = try #require(body["outcome"]?.objectValue)
                #expect(outcome["vendor"] == .string("fcm"))
                let media = try #require(outcome["media"]?.arrayValue?.compactMap { $0.objectValue })
                #expect(media.map { $0["platform"] } == [.string("ios"), .string("android")])
                let payload = try #require(body["payload"]?.objectValue)
                let android = try #require(
                    payload[path: JSONPath(keys: "message", "android", "notification", "image")]?.stringValue)
                #expect(android.hasPrefix("https://media.example.com/media/") && android.hasSuffix(".jpg"))
                #expect(
                    payload[path: JSONPath(keys: "message", "apns", "payload", "aps", "mutable-content")]
                        == .number("1"))
            }
            // A bare payload made for Huawei, read as Braze's shape on request.
            let braze = #"{"aps":{"alert":"Hi"},"ab":{"att":{"url":"\#(url)","type":"webp"}}}"#
            try await client.execute(
                uri: "/v1/process?vendor=braze&profile=huawei", method: .post, body: ByteBuffer(json: braze)
            ) { response in
                let body = try #require(response.body.object)
                let outcome = try #require(body["outcome"]?.objectValue)
                #expect(outcome["vendor"] == .string("braze"))
                #expect(outcome["media"]?.arrayValue?.first?.objectValue?["platform"] == .string("huawei"))
                let attachment = try #require(outcome["attachment"]?.objectValue)
                #expect(attachment["width"] == .number("1024") && attachment["height"] == .number("512"))
                #expect(body["payload"]?.objectValue?[path: JSONPath(keys: "ab", "att", "type")] == .string("jpg"))
            }
            for query in ["vendor=sendgrid", "profile=windows"] {
                try await client.execute(uri: "/v1/process?" + query, method: .post, body: ByteBuffer(json: "{}")) {
                    response in
                    #expect(response.status == .badRequest)
                    #expect(response.body.object?["error"]?.objectValue?["code"] == .string("invalid_parameter"))
                }
            }
        }
    }

    /// A campaign tool's CleverTap carousel, the bare data map: every image made 3:2 within 86 KB,
    /// the outcome showing each page's template and limits.
    @Test func carouselDataMapThroughTheHook() async throws {
        let server = try TestServer()
        let images = (1...3).map { #""pt_img\#($0)":"\#(origin.url("/photo"))?look=\#($0)""# }
        let body =
            #"{"pt_id":"pt_carousel","pt_title":"Spring","#
            + images.joined(separator: ",") + "}"
        try await server.test { client in
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: body)) { response in
                #expect(response.status == .ok)
                let answer = try #require(response.body.object)
                let outcome = try #require(answer["outcome"]?.objectValue)
                #expect(outcome["vendor"] == .string("clevertap"))
                let media = try #require(outcome["media"]?.arrayValue?.compactMap { $0.objectValue })
                #expect(media.count == 3)
                for (index, entry) in media.enumerated() {
                    #expect(entry["status"] == .string("processed"))
                    let template = try #require(entry["template"]?.objectValue)
                    #expect(template["name"] == .string("pt_carousel") && template["page"] == .number("\(index + 1)"))
                    #expect(template["aspect"] == .string("3:2") && template["max_bytes"] == .number("86000"))
                    #expect(template["decoded_limit"] == .number("5000000"))
                    let attachment = try #require(entry["attachment"]?.objectValue)
                    #expect(attachment["width"] == .number("600") && attachment["height"] == .number("400"))
                    #expect((attachment["bytes"]?.intValue ?? .max) <= 86_000)
                }
                let payload = try #require(answer["payload"]?.objectValue)
                #expect(payload["pt_title"] == .string("Spring"))
                #expect(payload["pt_img2"]?.stringValue?.hasSuffix(".jpg") == true)
            }
        }
    }

    @Test func onRejectAndBudgetHeader() async throws {
        let server = try TestServer()
        origin.route("/gone", .status(404, body: "gone"))
        let url = origin.url("/gone")
        try await server.test { client in
            try await client.execute(
                uri: "/v1/process?on_reject=keep", method: .post,
                headers: [HTTPField.Name("X-PushMedia-Budget-Ms")!: "3000"], body: ByteBuffer(json: payloadJSON(url))
            ) { response in
                let body = try #require(response.body.object)
                #expect(body["outcome"]?.objectValue?["reason"] == .string("http_404"))
                #expect(body["payload"]?.objectValue?["media_url"] == .string(url))
                #expect(response.headers[HTTPField.Name("X-PushMedia-Outcome")!] == "rejected/http_404")
            }
        }
    }

    @Test func batchKeepsOrderAndSharesFetches() async throws {
        let server = try TestServer()
        let photo = origin.url("/photo")
        let body =
            #"{"payloads":[\#(payloadJSON(photo)),"not an object",\#(payloadJSON(photo, extra: #","i":2"#)),{"aps":{"alert":"x"}}]}"#
        try await server.test { client in
            try await client.execute(uri: "/v1/batch", method: .post, body: ByteBuffer(json: body)) { response in
                #expect(response.status == .ok)
                let results = try #require(response.body.object?["results"]?.arrayValue)
                #expect(results.count == 4)
                let statuses = results.map { $0.objectValue?["outcome"]?.objectValue?["status"]?.stringValue }
                #expect(statuses == ["processed", "rejected", "processed", "skipped"])
                #expect(results[1].objectValue?["outcome"]?.objectValue?["reason"] == .string("not_an_object"))
                #expect(results[2].objectValue?["payload"]?.objectValue?["i"] == .number("2"))
            }
        }
        #expect(origin.hits("/photo") == 1)
    }

    @Test func batchErrors() async throws {
        let server = try TestServer()
        try await server.test { client in
            try await client.execute(uri: "/v1/batch", method: .post, body: ByteBuffer(json: #"{"items":[]}"#)) {
                response in
                #expect(response.status == .badRequest)
                #expect(response.body.object?["error"]?.objectValue?["code"] == .string("invalid_batch"))
            }
            let many = #"{"payloads":["# + Array(repeating: "{}", count: 501).joined(separator: ",") + "]}"
            try await client.execute(uri: "/v1/batch", method: .post, body: ByteBuffer(json: many)) { response in
                #expect(response.status == .badRequest)
                #expect(response.body.object?["error"]?.objectValue?["code"] == .string("too_many_payloads"))
            }
        }
    }

    @Test func metricsCountRequestsAndOutcomes() async throws {
        let server = try TestServer()
        let url = origin.url("/banner")
        try await server.test { client in
            _ = try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: payloadJSON(url)))
            _ = try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: payloadJSON(url)))
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                let text = String(buffer: response.body)
                #expect(text.contains(#"pushmedia_outcomes_total{status="processed",reason=""} 2"#))
                #expect(text.contains(#"pushmedia_cache_requests_total{result="hit"} 1"#))
                #expect(text.contains(#"pushmedia_cache_requests_total{result="miss"} 1"#))
                #expect(text.contains(#"pushmedia_http_requests_total{route="/v1/process",status="200"} 2"#))
                #expect(text.contains("pushmedia_fetch_seconds_bucket"))
                #expect(text.contains("pushmedia_jobs_in_flight 0"))
                #expect(text.contains("pushmedia_fetched_bytes_total"))
            }
        }
    }

    // MARK: behaviour under load and time

    @Test func concurrentRequestsShareOneFetch() async throws {
        let server = try TestServer()
        origin.route("/shared", .file(body: try sampleMedia("portrait.heic"), contentType: "image/heic"))
        let url = origin.url("/shared")
        let statuses = try await server.test { client in
            try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await client.execute(
                            uri: "/v1/process", method: .post, body: ByteBuffer(json: payloadJSON(url))
                        ) {
                            $0.body.object?["outcome"]?.objectValue?["status"]?.stringValue
                        }
                    }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
        }
        #expect(statuses == Array(repeating: "processed", count: 8))
        #expect(origin.hits("/shared") == 1)
    }

    @Test func workGoesOnAfterTheBudgetAndFillsTheCache() async throws {
        let server = try TestServer { $0.backgroundLimit = .seconds(30) }
        origin.route(
            "/late.webp", .delayed(.milliseconds(700), body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let url = origin.url("/late.webp")
        try await server.test { client in
            let first = try await client.execute(
                uri: "/v1/process?budget_ms=200", method: .post, body: ByteBuffer(json: payloadJSON(url))
            ) {
                $0.body.object?["outcome"]?.objectValue
            }
            #expect(first?["status"] == .string("best_attempt"))
            #expect(first?["reason"] == .string("budget_exceeded"))
            var later: JSONObject?
            for _ in 0..<50 {
                try await Task.sleep(for: .milliseconds(100))
                later = try await client.execute(
                    uri: "/v1/process?budget_ms=200", method: .post, body: ByteBuffer(json: payloadJSON(url))
                ) {
                    $0.body.object?["outcome"]?.objectValue
                }
                if later?["cache_hit"] == .bool(true) { break }
            }
            #expect(later?["status"] == .string("processed"))
            #expect(later?["cache_hit"] == .bool(true))
        }
        #expect(origin.hits("/late.webp") == 1)
    }

    @Test func overloadIsAnsweredAtOnce() async throws {
        let server = try TestServer {
            $0.maxJobs = 1
            $0.maxQueuedJobs = 0
        }
        origin.route(
            "/slow.webp", .delayed(.milliseconds(1500), body: try sampleMedia("banner.webp"), contentType: "image/webp")
        )
        let slow = origin.url("/slow.webp")
        let other = origin.url("/banner")
        try await server.test { client in
            async let first = client.execute(
                uri: "/v1/process?budget_ms=3000", method: .post, body: ByteBuffer(json: payloadJSON(slow))
            ) {
                $0.body.object?["outcome"]?.objectValue?["status"]
            }
            while origin.hits("/slow.webp") == 0 { try await Task.sleep(for: .milliseconds(20)) }
            let start = ContinuousClock.now
            try await client.execute(
                uri: "/v1/process?budget_ms=3000", method: .post, body: ByteBuffer(json: payloadJSON(other))
            ) { response in
                #expect(response.status == .ok)
                let outcome = response.body.object?["outcome"]?.objectValue
                #expect(outcome?["status"] == .string("best_attempt"))
                #expect(outcome?["reason"] == .string("overloaded"))
                #expect(response.body.object?["payload"]?.objectValue?["media_url"] == .string(other))
            }
            #expect(ContinuousClock.now - start < .seconds(1))
            #expect(try await first == .string("processed"))
        }
    }
}
