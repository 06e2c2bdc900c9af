import HTTPTypes
import Hummingbird

/// Answers a method that a known path does not take with 405 and `Allow` (RFC 9110 §15.5.6),
/// instead of the router's 404; unknown paths still get 404. The table is the routes the hook
/// registers, as `openapi.yaml` lists them.
struct MethodGuardMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Allowed methods by path; a path ending in `/` covers every name below it (`/media/<name>`).
    static var allowed: [(path: String, methods: [HTTPRequest.Method])] {
        [
            ("/v1/process", [.post]), ("/v1/batch", [.post]), ("/media/", [.get, .head]), ("/healthz", [.get]),
            ("/readyz", [.get]), ("/metrics", [.get]), ("/openapi.yaml", [.get]), ("/preview", [.get, .post]),
        ]
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let path = request.uri.path
        let match = Self.allowed.first { route in
            route.path.hasSuffix("/") ? path.hasPrefix(route.path) && path.count > route.path.count : path == route.path
        }
        if let match, !match.methods.contains(request.method) {
            var error = APIError(
                .methodNotAllowed, code: "method_not_allowed",
                message:
                    "\(request.method.rawValue) is not allowed on \(path); use "
                    + "\(match.methods.map(\.rawValue).joined(separator: " or "))"
            )
            error.headers[.allow] = match.methods.map(\.rawValue).joined(separator: ", ")
            throw error
        }
        return try await next(request, context)
    }
}
