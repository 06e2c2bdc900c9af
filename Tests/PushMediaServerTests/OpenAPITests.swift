import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// The served OpenAPI document lists exactly the routes and status codes the server answers.
@Suite("OpenAPI document")
struct OpenAPITests {
    /// (path, method, status) triples of the document's `paths`.
    static func operations(in yaml: String) -> Set<String> {
        var result = Set<String>()
        var path: String?
        var method: String?
        var inResponses = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            let indent = line.prefix { $0 == " " }.count
            let text = line.trimmingCharacters(in: .whitespaces)
            if indent == 0 && !text.isEmpty && text != "paths:" { path = nil }
            if indent == 2, text.hasPrefix("/"), text.hasSuffix(":") {
                path = String(text.dropLast())
                method = nil
                continue
            }
            if indent == 4, let verb = ["get:", "post:", "head:"].first(where: { text == $0 }) {
                method = String(verb.dropLast())
                inResponses = false
                continue
            }
            if indent == 6 { inResponses = text == "responses:" }
            if indent == 8, inResponses, let path, let method, text.hasPrefix("'"), text.hasSuffix("':") {
                result.insert("\(method.uppercased()) \(path) \(text.dropFirst().dropLast(2))")
            }
        }
        return result
    }

    @Test func everyListedRouteAndStatusIsWhatTheServerAnswers() async throws {
        let origin = try TestOrigin()
        origin.route("/img", .file(body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        origin.route("/slow", .delayed(.seconds(2), body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        origin.route("/missing", .status(404, body: "no"))
        origin.route("/down", .status(503, body: "down"))
        origin.route("/text", .file(body: Array("text".utf8), contentType: "text/plain"))
        let open = try TestServer(server: {
            $0.urls.allowedSources = [SourcePrefix(origin.baseURL + "/")!]
            $0.urls.budget = .milliseconds(300)
        })
        let locked = try TestServer(server: { $0.tokens = ["token"] })
        let payload = ByteBuffer(json: payloadJSON(origin.url("/img")))
        let big = ByteBuffer(repeating: UInt8(ascii: " "), count: 5 * 1024 * 1024)

        let document = try await open.test { client in
            try await client.execute(uri: "/openapi.yaml", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("application/yaml") == true)
                return String(buffer: response.body)
            }
        }
        #expect(document.hasPrefix("openapi: 3.1"))
        let name = try await open.test { client in
            try await client.execute(uri: "/v1/process", method: .post, body: payload) {
                try #require(
                    $0.body.object?["payload"]?.objectValue?["media_url"]?.stringValue?.split(separator: "/").last.map(
                        String.init))
            }
        }
        let missing = String(repeating: "0", count: 64) + ".jpg"
        let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        let previewBody = PreviewTests.form(payloadJSON(origin.url("/img")))

        func mediaURL(_ path: String, ext: String? = "jpg", options: [String] = ["pr:ios"]) -> String {
            "/insecure" + MediaURL.unsignedPath(source: origin.url(path), options: options, ext: ext, plain: true)
        }
        let image = mediaURL("/img")
        let long = mediaURL("/" + String(repeating: "a", count: 17_000))
        let mediaURLs = "/{signature}/{options}/{source}"

        // How to provoke each documented answer.
        typealias Probe = (
            server: TestServer, method: HTTPRequest.Method, uri: String, headers: HTTPFields, body: ByteBuffer?,
            prepare: (@Sendable () throws -> Void)?
        )
        let probes: [String: Probe] = [
            "POST /v1/process 200": (open, .post, "/v1/process", [:], payload, nil),
            "POST /v1/process 400": (open, .post, "/v1/process", [:], ByteBuffer(json: "{"), nil),
            "POST /v1/process 401": (locked, .post, "/v1/process", [:], payload, nil),
            "POST /v1/process 413": (open, .post, "/v1/process", [:], big, nil),
            "POST /v1/batch 200": (open, .post, "/v1/batch", [:], ByteBuffer(json: #"{"payloads":[{}]}"#), nil),
            "POST /v1/batch 400": (open, .post, "/v1/batch", [:], ByteBuffer(json: "[]"), nil),
            "POST /v1/batch 401": (locked, .post, "/v1/batch", [:], ByteBuffer(json: #"{"payloads":[]}"#), nil),
            "POST /v1/batch 413": (open, .post, "/v1/batch", [:], big, nil),
            "GET /media/{name} 200": (open, .get, "/media/\(name)", [:], nil, nil),
            "GET /media/{name} 206": (open, .get, "/media/\(name)", [.range: "bytes=0-1"], nil, nil),
            "GET /media/{name} 304": (open, .get, "/media/\(name)", [.ifNoneMatch: "\"\(name.prefix(64))\""], nil, nil),
            "GET /media/{name} 404": (open, .get, "/media/\(missing)", [:], nil, nil),
            "GET /media/{name} 416": (open, .get, "/media/\(name)", [.range: "bytes=99999999-"], nil, nil),
            "HEAD /media/{name} 200": (open, .head, "/media/\(name)", [:], nil, nil),
            "HEAD /media/{name} 404": (open, .head, "/media/\(missing)", [:], nil, nil),
            "GET \(mediaURLs) 200": (open, .get, image, [:], nil, nil),
            "GET \(mediaURLs) 206": (open, .get, image, [.range: "bytes=0-1"], nil, nil),
            "GET \(mediaURLs) 302": (open, .get, mediaURL("/img", ext: nil), [:], nil, nil),
            "GET \(mediaURLs) 304": (open, .get, image, [.ifNoneMatch: "*"], nil, nil),
            "GET \(mediaURLs) 307": (open, .get, mediaURL("/slow"), [:], nil, nil),
            "GET \(mediaURLs) 400": (open, .get, mediaURL("/img", options: ["zoom:2"]), [:], nil, nil),
            "GET \(mediaURLs) 403": (open, .get, "/bad" + image.dropFirst(9), [:], nil, nil),
            "GET \(mediaURLs) 404": (open, .get, mediaURL("/missing"), [:], nil, nil),
            "GET \(mediaURLs) 414": (open, .get, long, [:], nil, nil),
            "GET \(mediaURLs) 416": (open, .get, image, [.range: "bytes=99999999-"], nil, nil),
            "GET \(mediaURLs) 422": (open, .get, mediaURL("/text"), [:], nil, nil),
            "GET \(mediaURLs) 502": (open, .get, mediaURL("/down"), [:], nil, nil),
            "HEAD \(mediaURLs) 200": (open, .head, image, [:], nil, nil),
            "HEAD \(mediaURLs) 302": (open, .head, mediaURL("/img", ext: nil), [:], nil, nil),
            "HEAD \(mediaURLs) 307": (open, .head, mediaURL("/slow", ext: "png"), [:], nil, nil),
            "HEAD \(mediaURLs) 400": (open, .head, mediaURL("/img", options: ["zoom:2"]), [:], nil, nil),
            "HEAD \(mediaURLs) 403": (open, .head, "/bad" + image.dropFirst(9), [:], nil, nil),
            "HEAD \(mediaURLs) 404": (locked, .head, image, [:], nil, nil),
            "HEAD \(mediaURLs) 414": (open, .head, long, [:], nil, nil),
            "HEAD \(mediaURLs) 422": (open, .head, mediaURL("/text"), [:], nil, nil),
            "HEAD \(mediaURLs) 502": (open, .head, mediaURL("/down"), [:], nil, nil),
            "GET /healthz 200": (open, .get, "/healthz", [:], nil, nil),
            "GET /readyz 200": (open, .get, "/readyz", [:], nil, nil),
            "GET /readyz 503": (
                locked, .get, "/readyz", [:], nil,
                { [path = locked.store.path] in try FileManager.default.removeItem(atPath: path + "/.incoming") }
            ),
            "GET /metrics 200": (open, .get, "/metrics", [:], nil, nil),
            "GET /metrics 401": (locked, .get, "/metrics", [:], nil, nil),
            "GET /openapi.yaml 200": (open, .get, "/openapi.yaml", [:], nil, nil),
            "GET /preview 200": (open, .get, "/preview", [:], nil, nil),
            "GET /preview 404": (locked, .get, "/preview", [:], nil, nil),
            "POST /preview 200": (open, .post, "/preview", form, previewBody, nil),
            "POST /preview 400": (open, .post, "/preview", form, ByteBuffer(string: "app=x"), nil),
            "POST /preview 404": (locked, .post, "/preview", form, previewBody, nil),
            "POST /preview 413": (open, .post, "/preview", form, big, nil),
        ]
        #expect(Self.operations(in: document) == Set(probes.keys))
        for (operation, probe) in probes.sorted(by: { $0.key < $1.key }) {
            try probe.prepare?()
            let status = try await probe.server.test { client in
                try await client.execute(uri: probe.uri, method: probe.method, headers: probe.headers, body: probe.body)
                { $0.status.code }
            }
            #expect("\(status)" == operation.split(separator: " ").last.map(String.init), "\(operation)")
        }
    }
}
