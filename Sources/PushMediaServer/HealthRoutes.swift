import Foundation
import HTTPTypes
import Hummingbird
import PushMedia

/// `/healthz`, `/readyz`, `/metrics`, `/openapi.yaml`.
struct HealthRoutes<Context: RequestContext>: Sendable {
    let pipeline: Pipeline
    let metrics: ServerMetrics
    let executor: BlockingExecutor

    func add(to router: Router<Context>) {
        router.get("healthz") { _, _ in Response.json(.object(JSONObject([("status", .string("ok"))]))) }
        router.get("readyz", use: ready)
        router.get("metrics") { _, _ in
            let text = metrics.render()
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .contentLength: String(text.count)],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
        }
        router.get("openapi.yaml") { _, _ in
            guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"), let data = try? Data(contentsOf: url) else {
                throw APIError(.internalServerError, code: "missing_document", message: "openapi.yaml is not bundled")
            }
            return Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8", .contentLength: String(data.count)],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        }
    }

    /// Ready when the store takes a write and libvips encodes an image.
    @Sendable func ready(_ request: Request, context: Context) async throws -> Response {
        let store = pipeline.store
        let (storeWritable, vipsWorks) = await executor.run { () -> (Bool, Bool) in
            let path = store.temporaryPath()
            let writable = FileManager.default.createFile(atPath: path, contents: Data("ready".utf8)) && unlink(path) == 0
            return (writable, Transcoder.selfTest())
        }
        let ready = storeWritable && vipsWorks
        let checks = JSONObject([("store", .string(storeWritable ? "ok" : "not writable: \(store.directory)")),
                                 ("libvips", .string(vipsWorks ? "ok" : "failed to encode a test image"))])
        return Response.json(.object(JSONObject([("status", .string(ready ? "ready" : "unavailable")), ("checks", .object(checks))])),
                             status: ready ? .ok : .serviceUnavailable)
    }
}
