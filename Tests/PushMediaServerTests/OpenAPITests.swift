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
        let open = try TestServer()
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
