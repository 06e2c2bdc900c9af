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
