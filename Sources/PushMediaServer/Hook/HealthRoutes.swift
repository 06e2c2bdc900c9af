import Foundation
import HTTPTypes
import Hummingbird
import PushMedia
import PushMediaRelay

/// `/healthz`, `/readyz`, `/metrics`, `/openapi.yaml`.
struct HealthRoutes<Context: RequestContext>: Sendable {
    let pipeline: Pipeline
    let metrics: ServerMetrics
    /// What `/metrics` reads from the other parts.
    let readings: MetricsReadings
    /// `--min-free-space`: the download disk's free bytes below which `/readyz` is not ready.
    let minFreeSpace: Int64
    let executor: BlockingExecutor
    /// The relays' held credentials: certificates' days left in the answer's `certificates`.
    var credentials: RelayCredentials?

    /// `scrape` is the `/metrics` group (behind the auth middleware); nil when `/metrics` has a
    /// listener of its own (`--metrics-port`).
    func add(to router: Router<Context>, metrics scrape: RouterGroup<Context>?) {
        router.get("healthz") { _, _ in Response.json(.object(JSONObject([("status", .string("ok"))]))) }
        router.get("readyz", use: ready)
        scrape?.get { [metrics, readings] _, _ in Self.exposition(metrics, readings) }
        router.get("openapi.yaml") { _, _ in
            guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
                let data = try? Data(contentsOf: url)
            else {
                throw APIError(.internalServerError, code: "missing_document", message: "openapi.yaml is not bundled")
            }
            return Response(
                status: .ok,
                headers: [.contentType: "application/yaml; charset=utf-8", .contentLength: String(data.count)],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        }
    }

    /// The Prometheus text exposition of `metrics`, with what `readings` reads now.
    static func exposition(_ metrics: ServerMetrics, _ readings: MetricsReadings) -> Response {
        let text = metrics.render(readings)
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .contentLength: String(text.count)],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
    }

    /// Ready when the store works (a local store takes a write; an object store answers with its
    /// bucket within 2 s), the download disk has `--min-free-space` free, and libvips encodes
    /// an image. The answer names what failed.
    @Sendable func ready(_ request: Request, context: Context) async throws -> Response {
        let store = pipeline.store
        let minimum = minFreeSpace
        let (storeProblem, vipsWorks, free) = await executor.run { () -> (String?, Bool, Int64?) in
            var problem: String?
            do { try store.checkReady(deadline: .now + .seconds(2)) } catch { problem = "\(error)" }
            return (problem, Transcoder.selfTest(), store.freeWorkSpace)
        }
        var diskProblem: String?
        if minimum > 0, let free, free < minimum {
            diskProblem = "\(free) bytes free on the download disk, under --min-free-space \(minimum)"
        }
        let ready = storeProblem == nil && diskProblem == nil && vipsWorks
        let checks = JSONObject([
            ("store", .string(storeProblem ?? "ok")), ("disk", .string(diskProblem ?? "ok")),
            ("libvips", .string(vipsWorks ? "ok" : "failed to encode a test image")),
        ])
        var answer = JSONObject([("status", .string(ready ? "ready" : "unavailable")), ("checks", .object(checks))])
        if let certificates = credentials?.readiness { answer["certificates"] = certificates }
        return Response.json(.object(answer), status: ready ? .ok : .serviceUnavailable)
    }
}
