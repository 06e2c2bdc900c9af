import HTTPTypes
import Hummingbird
import PushMedia
import Tracing

/// The server span of each request the sampler traces (installed only with `--otel-endpoint`):
/// joined to the caller's trace by its W3C `traceparent` and `tracestate`, named after the
/// route, with the method, the route, the status and the outcome (`x-pushmedia-outcome`); it
/// ends when the answer is ready. Never the path nor the query: a media URL's path carries its
/// source, and a query may carry a token.
struct TraceMiddleware<Context: RequestContext>: RouterMiddleware {
    let sampler: TraceSampler

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard
            let span = sampler.start(
                "HTTP \(request.method.rawValue)", ofKind: .server, from: request.headers, using: HeaderFields())
        else { return try await next(request, context) }
        span.setAttribute("http.request.method", request.method.rawValue)
        // Ends once the answer is ready (a stored file's bytes stream after it).
        defer { span.end() }
        do {
            let response = try await ServiceContext.$current.withValue(PipelineTrace.context(of: span)) {
                try await next(request, context)
            }
            finish(span, request.method, route: context.endpointPath, status: response.status.code)
            // The field as it was set: `HTTPFields`' subscript joins every value of a name into
            // a new string.
            if let outcome = response.headers.first(where: { $0.name == .pushMediaOutcome }) {
                span.setAttribute("pushmedia.outcome", outcome.value)
            }
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            finish(span, request.method, route: context.endpointPath, status: status)
            if let error = error as? APIError { span.setAttribute("pushmedia.reason", error.code) }
            throw error
        }
    }

    private func finish(_ span: any Span, _ method: HTTPRequest.Method, route: String?, status: Int) {
        // Every path that is no other route is a media URL's (`MediaURLRoutes`).
        let route = route.map { $0 == "/**" ? "/{signature}/{options}/{source}" : $0 } ?? "unmatched"
        span.operationName = "\(method.rawValue) \(route)"
        span.editAttributes { attributes in
            attributes["http.route"] = route
            attributes["http.response.status_code"] = status
        }
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

/// Reads a propagated context's fields from a request's headers.
private struct HeaderFields: Extractor {
    static let traceParent = HTTPField.Name("traceparent")!
    static let traceState = HTTPField.Name("tracestate")!

    func extract(key name: String, from headers: HTTPFields) -> String? {
        // The two names W3C Trace Context reads, made once.
        switch name {
        case "traceparent": headers[Self.traceParent]
        case "tracestate": headers[Self.traceState]
        default: HTTPField.Name(name).flatMap { headers[$0] }
        }
    }
}
