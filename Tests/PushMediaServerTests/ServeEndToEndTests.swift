import Foundation
import PushMedia
import PushMediaTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `pushmedia serve` as a real process on an ephemeral loopback port.
@Suite("pushmedia serve", .serialized)
struct ServeEndToEndTests {
    typealias Server = ServeProcess

    @Test func processesAPayloadAndServesItsAttachment() async throws {
        let origin = try TestOrigin()
        let photo = try sampleMedia("photo-exif.jpg")
        origin.route("/campaign/hero", .file(body: photo, contentType: "application/octet-stream"))
        let store = TemporaryDirectory()
        let server = try Server(arguments: [
            "--store", store.path, "--allow-private-networks", "--token", "campaign-token",
        ])
        let payload =
            #"{"aps":{"alert":{"title":"Spring","body":"Deals"},"mutable-content":1},"image_url":"\#(origin.url("/campaign/hero"))"}"#

        let (denied, _) = try await ServeProcess.request(server.url("/v1/process"), method: "POST", body: payload)
        #expect(denied.statusCode == 401)

        let (response, data) = try await ServeProcess.request(
            server.url("/v1/process"), method: "POST", body: payload,
            headers: ["Authorization": "Bearer campaign-token", "Content-Type": "application/json"])
        #expect(response.statusCode == 200)
        let body = try #require(try JSONValue.parse(data).objectValue)
        #expect(body["outcome"]?.objectValue?["status"] == .string("processed"))
        let attachment = try #require(body["payload"]?.objectValue?["image_url"]?.stringValue)
        #expect(attachment.hasPrefix("http://127.0.0.1:\(server.port)/media/") && attachment.hasSuffix(".jpg"))

        let (media, bytes) = try await ServeProcess.request(URL(string: attachment)!)
        #expect(media.statusCode == 200)
        #expect(media.value(forHTTPHeaderField: "Content-Type") == "image/jpeg")
        #expect(media.value(forHTTPHeaderField: "Content-Length") == String(bytes.count))
        #expect(media.value(forHTTPHeaderField: "Cache-Control") == "public, max-age=31536000, immutable")
        #expect(media.value(forHTTPHeaderField: "ETag")?.count == 66)
        #expect(Array(bytes.prefix(3)) == [0xFF, 0xD8, 0xFF])
        let name = String(attachment.split(separator: "/").last!)
        #expect(bytes == (try Data(contentsOf: URL(fileURLWithPath: store.path + "/" + name))))
        #expect(bytes.count < photo.count)

        // A HEAD on a kept-alive connection must not hold up the graceful stop below.
        let (head, empty) = try await ServeProcess.request(URL(string: attachment)!, method: "HEAD")
        #expect(
            head.statusCode == 200 && empty.isEmpty
                && head.value(forHTTPHeaderField: "Content-Length") == String(bytes.count))

        // With auth configured, /metrics needs it too.
        let (refused, _) = try await ServeProcess.request(server.url("/metrics"))
        #expect(refused.statusCode == 401)
        let (metrics, text) = try await ServeProcess.request(
            server.url("/metrics"), headers: ["Authorization": "Bearer campaign-token"])
        #expect(metrics.statusCode == 200)
        #expect(String(decoding: text, as: UTF8.self).contains("pushmedia_outcomes_total"))
        #expect(server.stop() == 0)
    }

    /// `--metrics-port`: /metrics on a listener of its own, without auth; the hook's port no
    /// longer serves it.
    @Test func metricsOnTheirOwnListener() async throws {
        let store = TemporaryDirectory()
        let server = try Server(arguments: ["--store", store.path, "--token", "campaign-token", "--metrics-port", "0"])
        let line = try #require(server.line(containing: "PushMedia metrics on"), "\(server.output)")
        let address = try #require(line.split(separator: " ").last.map(String.init))
        #expect(address.hasPrefix("http://127.0.0.1:") && address.hasSuffix("/metrics"))
        // A request to the hook shows up on the metrics listener.
        let (processed, _) = try await ServeProcess.request(
            server.url("/v1/process"), method: "POST", body: #"{"aps":{"alert":"Hi"}}"#,
            headers: ["Authorization": "Bearer campaign-token"])
        #expect(processed.statusCode == 200)
        let (response, text) = try await ServeProcess.request(try #require(URL(string: address)))
        #expect(response.statusCode == 200)
        #expect(
            String(decoding: text, as: UTF8.self).contains(
                "pushmedia_outcomes_total{status=\"skipped\",reason=\"no_media\"} 1"),
            "\(String(decoding: text, as: UTF8.self))")
        let (elsewhere, _) = try await ServeProcess.request(
            URL(string: address.replacingOccurrences(of: "/metrics", with: "/v1/process"))!, method: "POST", body: "{}")
        #expect(elsewhere.statusCode == 404, "the metrics listener serves /metrics only")
        let (moved, _) = try await ServeProcess.request(
            server.url("/metrics"), headers: ["Authorization": "Bearer campaign-token"])
        #expect(moved.statusCode == 404)
        let (health, _) = try await ServeProcess.request(server.url("/healthz"))
        #expect(health.statusCode == 200)
        #expect(server.stop() == 0)
    }

    @Test func finishesARequestInFlightOnSIGTERM() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/slow", .delayed(.milliseconds(1200), body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let store = TemporaryDirectory()
        let server = try Server(arguments: ["--store", store.path, "--allow-private-networks"])
        let payload = #"{"aps":{"alert":"Hi","mutable-content":1},"media_url":"\#(origin.url("/slow"))"}"#
        async let answer = ServeProcess.request(
            server.url("/v1/process?budget_ms=10000"), method: "POST", body: payload)
        // The signal comes once the job is fetching: the request is in flight, its answer 1.2 s away.
        let fetching = try await eventually(within: .seconds(20)) { origin.hits("/slow") > 0 }
        kill(server.process.processIdentifier, SIGTERM)
        #expect(fetching, "the origin never saw the fetch")
        let (response, data) = try await answer
        #expect(response.statusCode == 200)
        #expect(try JSONValue.parse(data).objectValue?["outcome"]?.objectValue?["status"] == .string("processed"))
        #expect(server.stop() == 0)
        await #expect(throws: (any Error).self) { _ = try await ServeProcess.request(server.url("/healthz")) }
    }
}
