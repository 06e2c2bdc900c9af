import Foundation
import HTTPTypes
import Hummingbird
import PushMedia
import PushMediaRelay

/// `POST /v1/process` and `POST /v1/batch`.
struct ProcessRoutes<Context: RequestContext>: Sendable {
    let pipeline: Pipeline
    /// The request limits.
    let server: ServerConfig
    let metrics: ServerMetrics
    let baseURL: @Sendable () -> String
    /// Ready answers to repeated bodies whose media came from the cache.
    let answers: RepeatAnswers

    func add(to group: RouterGroup<Context>) {
        group.post("process", use: process)
        group.post("batch", use: batch)
    }

    @Sendable func process(_ request: Request, context: Context) async throws -> Response {
        let start = ContinuousClock.now
        let options = try Self.options(request, default: pipeline.config)
        let body = try await Self.collect(request, limit: server.maxPayloadBodyBytes)
        let base = baseURL()
        let key = RepeatAnswers.key(
            .process(
                onReject: options.onReject?.rawValue, vendor: options.vendor?.rawValue, profile: options.profile?.id),
            baseURL: base, body: body)
        if !options.refresh, let ready = answers.answer(key, total: start.millisecondsElapsed, pipeline: pipeline) {
            metrics.record(ready.outcome)
            var response = Response.json(bytes: ready.bytes)
            response.headers[.pushMediaOutcome] = ready.outcome.label
            return response
        }
        let result: PipelineResult
        do {
            result = try await pipeline.process(
                body,
                context: PayloadContext(
                    budget: options.budget, onReject: options.onReject, baseURL: base,
                    vendor: options.vendor, profile: options.profile,
                    refresh: options.refresh))
        } catch {
            throw APIError(.badRequest, code: error.reason, message: error.description)
        }
        metrics.record(result.outcome)
        var response = Response.json(bytes: answers.keep(key, result: result) ?? resultJSON(result) + [0x0A])
        response.headers[.pushMediaOutcome] = result.outcome.label
        return response
    }

    @Sendable func batch(_ request: Request, context: Context) async throws -> Response {
        let options = try Self.options(request, default: pipeline.config)
        let body = try await Self.collect(request, limit: server.maxBatchBodyBytes)
        let document: JSONValue
        do { document = try JSONValue.parse(body, maxDepth: 130) } catch {
            throw APIError(.badRequest, code: "invalid_json", message: "invalid JSON: \(error)")
        }
        guard let items = document.objectValue?["payloads"]?.arrayValue else {
            throw APIError(
                .badRequest, code: "invalid_batch", message: "the body must be an object with a \"payloads\" array")
        }
        let limit = server.maxBatchPayloads
        guard items.count <= limit else {
            throw APIError(
                .badRequest, code: "too_many_payloads", message: "\(items.count) payloads; at most \(limit) per batch")
        }
        // One budget for the whole batch; items naming the same media share one job.
        let deadline = ContinuousClock.now + (options.budget ?? pipeline.config.budget)
        let context = PayloadContext(
            onReject: options.onReject, baseURL: baseURL(), deadline: deadline, vendor: options.vendor,
            profile: options.profile, refresh: options.refresh)
        let width = max(1, pipeline.gate?.limit ?? 8)
        let results = await items.mapConcurrently(width: width) { index, item in
            await self.processItem(item, index: index, context: context)
        }
        var bytes = Array(#"{"results":["#.utf8)
        for (index, item) in results.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += item
        }
        bytes += Array("]}\n".utf8)
        return Response.json(bytes: bytes)
    }

    private func processItem(_ item: JSONValue, index: Int, context: PayloadContext) async -> [UInt8] {
        var context = context
        context.label = "payloads[\(index)]"
        guard let payload = item.objectValue else {
            var outcome = Outcome(
                status: .rejected, reason: "not_an_object",
                message: "payloads[\(index)]: a payload must be a JSON object")
            let bytes = item.serialized()
            outcome.payloadBytes = bytes.count
            metrics.record(outcome)
            return resultJSON(payload: bytes, outcome: outcome)
        }
        let result = await pipeline.process(payload, context: context)
        metrics.record(result.outcome)
        return resultJSON(result)
    }

    struct Options {
        /// Revalidate cached media with their origins (`refresh=1`, or `Cache-Control: no-cache` or
        /// `max-age=0`).
        var refresh = false
        var budget: Duration?
        var onReject: OnReject?
        var vendor: Vendor?
        var profile: PlatformProfile?
    }

    /// `budget_ms` (query or `X-PushMedia-Budget-Ms`), `on_reject`, `vendor`, `profile` and
    /// `refresh` (query; `Cache-Control: no-cache` or `max-age=0` also refreshes).
    static func options(_ request: Request, default config: PushMediaConfig) throws -> Options {
        var options = Options()
        if let text = request.uri.queryParameters.get("refresh") {
            switch text.lowercased() {
            case "1", "true", "yes": options.refresh = true
            case "0", "false", "no": options.refresh = false
            default:
                throw APIError(
                    .badRequest, code: "invalid_parameter",
                    message: "refresh must be true or false (1 or 0), got \"\(text)\"")
            }
        }
        if let control = request.headers[.cacheControl]?.lowercased(),
            control.split(separator: ",").contains(where: {
                ["no-cache", "max-age=0"].contains($0.trimmingCharacters(in: .whitespaces))
            })
        {
            options.refresh = true
        }
        // Both are checked when both are given; the query parameter wins.
        for (name, given) in [
            ("X-PushMedia-Budget-Ms", request.headers[.pushMediaBudget]),
            ("budget_ms", request.uri.queryParameters.get("budget_ms").map { String($0) }),
        ] {
            guard let text = given else { continue }
            guard let milliseconds = Int64(text), (1...600_000).contains(milliseconds) else {
                throw APIError(
                    .badRequest, code: "invalid_parameter",
                    message: "\(name) must be an integer from 1 to 600000, got \"\(text)\"")
            }
            options.budget = .milliseconds(milliseconds)
        }
        if let text = request.uri.queryParameters.get("on_reject") {
            guard let value = OnReject(rawValue: text) else {
                throw APIError(
                    .badRequest, code: "invalid_parameter", message: "on_reject must be drop or keep, got \"\(text)\"")
            }
            options.onReject = value
        }
        if let text = request.uri.queryParameters.get("vendor"), text != "auto" {
            guard let value = Vendor(rawValue: text) else {
                throw APIError(
                    .badRequest, code: "invalid_parameter",
                    message:
                        "vendor must be auto or one of \(Vendor.allCases.map(\.rawValue).joined(separator: ", ")), "
                        + "got \"\(text)\""
                )
            }
            options.vendor = value
        }
        if let text = request.uri.queryParameters.get("profile") {
            guard let value = PlatformProfile.profiles[text] else {
                throw APIError(
                    .badRequest, code: "invalid_parameter",
                    message:
                        "profile must be one of \(PlatformProfile.profiles.keys.sorted().joined(separator: ", ")), "
                        + "got \"\(text)\""
                )
            }
            options.profile = value
        }
        return options
    }

    /// The request body, refused with 413 past `limit`.
    static func collect(_ request: Request, limit: Int) async throws -> [UInt8] {
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw APIError(
                .contentTooLarge, code: "body_too_large", message: "the body is \(declared) bytes; at most \(limit)")
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Array(buffer.readableBytesView)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError(.contentTooLarge, code: "body_too_large", message: "the body exceeds \(limit) bytes")
        }
    }

}

extension HTTPField.Name {
    static let pushMediaBudget = Self("X-PushMedia-Budget-Ms")!
    static let pushMediaSignature = Self("X-PushMedia-Signature")!
    /// Set on `/v1/process` answers: `status` or `status/reason`, for logs and load balancers.
    static let pushMediaOutcome = Self("X-PushMedia-Outcome")!
}
