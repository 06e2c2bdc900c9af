import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PushMedia

/// One log line per request (method, route, status, outcome, ms) and the request counter.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            log(
                request, context: context, status: response.status.code, outcome: response.headers[.pushMediaOutcome],
                start: start)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            log(request, context: context, status: status, outcome: nil, start: start)
            throw error
        }
    }

    private func log(
        _ request: Request, context: Context, status: Int, outcome: String?, start: ContinuousClock.Instant
    ) {
        let route = context.endpointPath ?? "unmatched"
        let elapsed = ContinuousClock.now - start
        let tenths = elapsed.components.seconds * 10_000 + elapsed.components.attoseconds / 100_000_000_000_000
        metrics.request(route: route, status: status)
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)", "route": "\(route)", "status": "\(status)",
            "ms": "\(tenths / 10).\(tenths % 10)",
        ]
        if let outcome { metadata["outcome"] = "\(outcome)" }
        context.logger.info("request", metadata: metadata)
    }
}

/// Log lines as JSON objects (`--log-format json`): time, level, label, message and metadata.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String

    /// A handler for `label` that logs `logLevel` and more severe levels.
    public init(label: String, logLevel: Logger.Level = .info) {
        self.label = label
        self.logLevel = logLevel
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object = JSONObject()
        object["time"] = .string(ISO8601DateFormatter().string(from: Date()))
        object["level"] = .string(event.level.rawValue)
        object["label"] = .string(label)
        object["message"] = .string("\(event.message)")
        if let error = event.error { object["error"] = .string("\(error)") }
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }).sorted(by: {
            $0.key < $1.key
        }) {
            object[key] = .string("\(value)")
        }
        var bytes = JSONValue.object(object).serialized()
        bytes.append(0x0A)
        FileHandle.standardError.write(Data(bytes))
    }
}
