import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushMedia

/// `GET|HEAD /media/<name>`: serves the store's files, and nothing else (`StoredMedia`), cached
/// for a year: a name is its content's SHA-256. With `--base-url` pointing at the bucket or a
/// CDN, phones never come here.
struct MediaRoutes<Context: ConnectionContext>: Sendable {
    let media: StoredMedia

    func add(to router: Router<Context>) {
        router.get("media/{name}", use: serve)
        router.head("media/{name}", use: serve)
    }

    @Sendable func serve(_ request: Request, context: Context) async throws -> Response {
        let name = context.parameters.get("name") ?? ""
        guard MediaStore.isValidName(name) else {
            throw APIError(.notFound, code: "not_found", message: "no such media")
        }
        return try await media.respond(
            name, request: request, context: context, headers: [.cacheControl: "public, max-age=31536000, immutable"])
    }
}
