import HTTPTypes
import Hummingbird
import PushMedia
import Tracing

/// The server span of each request when traces are on (`--otel-endpoint`): joined to the
/// caller's trace by its W3C `traceparent` and `tracestate`, named after the route, with the
/// method, the route, the status and the outcome (`x-pushmedia-outcome`). Never the path nor the
/// query: a media URL's path carries its source, and a query may carry a token. Installed only
/// when traces are on.
struct TraceMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var parent = ServiceContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &parent, using: HeaderFields())
        let span = startSpan("HTTP \(request.method.rawValue)", context: parent, ofKind: .server)
        span.attributes["http.request.method"] = request.method.rawValue
        do {
            var response = try await ServiceContext.$current.withValue(span.context) {
                try await next(request, context)
            }
            finish(span, request.method, route: context.endpointPath, status: response.status.code)
            if let outcome = response.headers[.pushMediaOutcome] { span.attributes["pushmedia.outcome"] = outcome }
            // Ends once the body is written (a media file streams after this returns).
            let (ending, body) = (SpanEnding(span), response.body)
            response.body = ResponseBody(contentLength: body.contentLength) { writer in
                defer { ending.end() }
                try await body.write(writer)
            }
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            finish(span, request.method, route: context.endpointPath, status: status)
            if let error = error as? APIError { span.attributes["pushmedia.reason"] = error.code }
            span.end()
            throw error
        }
    }

    private func finish(_ span: any Span, _ method: HTTPRequest.Method, route: String?, status: Int) {
        // Every path that is no other route is a media URL's (`MediaURLRoutes`).
        let route = route.map { $0 == "/**" ? "/{signature}/{options}/{source}" : $0 } ?? "unmatched"
        span.operationName = "\(method.rawValue) \(route)"
        span.attributes["http.route"] = route
        span.attributes["http.response.status_code"] = status
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

/// Reads a propagated context's fields from a request's headers.
private struct HeaderFields: Extractor {
    func extract(key name: String, from headers: HTTPFields) -> String? {
        HTTPField.Name(name).flatMap { headers[$0] }
    }
}

/// Ends a span once, from the body's post-write closure.
private final class SpanEnding: @unchecked Sendable {
    private let span: Locked<(any Span)?>

    init(_ span: any Span) { self.span = Locked(span) }

    func end() { span.withLock { $0.take() }?.end() }
}
