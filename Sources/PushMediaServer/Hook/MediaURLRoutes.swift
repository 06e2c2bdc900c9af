import Foundation
import HTTPTypes
import Hummingbird
import PushMedia
import Tracing

/// `GET|HEAD /<signature>/<options>/<source>.<ext>`: media URLs in imgproxy's grammar
/// (`MediaURL`), for campaign tools whose image field takes a URL: the phone's SDK downloads the
/// URL, PushMedia fetches the source and answers with the file made for the platform, from the
/// store once made. Off unless a key or an allow-listed source is configured (then every path
/// no other route takes is a 404).
struct MediaURLRoutes<Context: ConnectionContext>: Sendable {
    let pipeline: Pipeline
    /// The media URLs' settings and keys in force (a reload may change them).
    let live: LiveSettings
    let metrics: ServerMetrics
    let media: StoredMedia
    /// Paths parsed before, and the answers last given for them.
    let paths: MediaURLPaths
    /// What a kept answer's second is read against.
    var clock = DeadlineClock.continuous

    func add(to router: Router<Context>) {
        router.get("**", use: serve)
        router.head("**", use: serve)
    }

    @Sendable func serve(_ request: Request, context: Context) async throws -> Response {
        let current = live.current
        guard current.urls.enabled else { throw APIError(.notFound, code: "not_found", message: "no such route") }
        let path = request.uri.path
        let now = clock.now
        // The answer given for this path within the last second, under the same settings: what
        // the rest of this function decided then and would decide again.
        if let answer = paths.answer(path, generation: current.generation, now: now) {
            return try await send(answer, request: request, context: context)
        }
        // The signature check and the options, in their span: what was asked, never the source, and
        // on a refusal its code only (a message may quote the path).
        let span = PipelineTrace.child("pushmedia.media_url.verify")
        let (url, names, signedBy, profile): (MediaURL, MediaURLPaths.Names, MediaURLKey?, PlatformProfile)
        do {
            (url, names, signedBy, profile) = try admit(path, current: current)
        } catch {
            if let span {
                let code = (error as? APIError)?.code ?? "error"
                span.setAttribute("pushmedia.reason", code)
                span.setStatus(SpanStatus(code: .error, message: code))
                span.end()
            }
            throw error
        }
        if let span {
            span.editAttributes { attributes in
                attributes["pushmedia.signed"] = signedBy != nil
                attributes["pushmedia.profile"] = profile.id
                attributes["pushmedia.format"] = url.format?.fileExtension ?? "profile"
            }
            span.end()
        }
        let delivery = await pipeline.deliver(
            DeliveryRequest(
                source: url.source, profile: profile, format: url.format, cacheBuster: url.cacheBuster,
                budget: current.urls.budget(for: profile)))
        switch delivery {
        case let .ready(entry, cacheHit):
            guard let format = url.format else {
                return redirect(url, to: entry, signedBy: signedBy, query: request.uri.query, profile: profile.id)
            }
            let outcome = entry.reason.map { "/" + $0 } ?? (cacheHit ? "/cache" : "")
            let answer = MediaURLPaths.Answer(
                file: entry.attachment.name,
                headers: [
                    .contentDisposition:
                        "inline; filename=\"\(names.asked ?? Self.fileName(url.sourceParts, format: format))\"",
                    .pushMediaOutcome: entry.status.rawValue + outcome,
                ],
                freshUntil: entry.freshUntil,
                counted: metrics.mediaURLCounter(
                    profile: profile.id, outcome: cacheHit ? "cache" : entry.status.rawValue))
            // A fresh entry's answer from the cache is given again for a second (not a stale one's).
            if cacheHit, lifetime(entry.freshUntil) > 0 {
                paths.keep(path, answer: answer, generation: current.generation, now: now)
            }
            return try await send(answer, request: request, context: context)
        case let .notReady(reason, message, preview):
            if let preview, url.format == .jpeg {
                // The thumbnail, for this phone only: a cache in front must ask again for the attachment.
                metrics.mediaURL(profile: profile.id, outcome: "preview")
                let headers: HTTPFields = [
                    .cacheControl: "no-store",
                    .contentDisposition: "inline; filename=\"\(names.preview)\"",
                    .pushMediaOutcome: "best_attempt/\(reason)",
                ]
                return try await media.respond(preview.name, request: request, context: context, headers: headers)
            }
            return try await redirectToSource(url.source, reason: reason, message: message, profile: profile.id)
        case let .failed(reason, message):
            let (status, cacheable) = Self.status(forFailure: reason)
            var error = answer(status, code: reason, message: message, profile: profile.id)
            error.headers[.cacheControl] = cacheable ? "public, max-age=60" : "no-store"
            throw error
        }
    }

    /// A stored file's answer, counted, with a cache's lifetime for it.
    private func send(_ answer: MediaURLPaths.Answer, request: Request, context: Context) async throws -> Response {
        answer.counted.increment()
        var headers = answer.headers
        headers[.cacheControl] = "public, max-age=\(lifetime(answer.freshUntil))"
        return try await media.respond(answer.file, request: request, context: context, headers: headers)
    }

    /// `path` as a media URL this server answers under the settings in force (parsed once; the
    /// signature checked against the keys), with the key that signed it and its profile; the
    /// error answer otherwise, before anything is fetched.
    private func admit(_ path: String, current: LiveSettings.Values) throws
        -> (MediaURL, MediaURLPaths.Names, signedBy: MediaURLKey?, PlatformProfile)
    {
        let url: MediaURL
        let names: MediaURLPaths.Names
        let signedBy: MediaURLKey?
        do {
            if let known = paths.parsed(path) {
                (url, names) = known
                signedBy = try verify(url.signature, url.signedPath, keys: current.urlKeys)
            } else {
                let (signature, signedPath) = try MediaURL.split(path)
                signedBy = try verify(signature, signedPath, keys: current.urlKeys)
                url = try MediaURL.parse(path)
                names = MediaURLPaths.Names(
                    asked: url.format.map { Self.fileName(url.sourceParts, format: $0) },
                    preview: Self.fileName(url.sourceParts, format: .jpeg))
                paths.remember(path, url: url, names: names)
            }
        } catch let error as MediaURLError {
            throw refused(error)
        }
        let profileName = url.preset ?? PlatformProfile.ios.id
        guard let profile = PlatformProfile.preset(named: profileName) else {
            throw answer(
                .badRequest, code: "invalid_option",
                message: "option \"pr\": unknown profile \"\(profileName)\"; use \(PlatformProfile.presetNames)",
                profile: "unknown")
        }
        if url.isUnsigned,
            !current.urls.allowedSources.contains(where: { prefix in url.sourceParts.map(prefix.matches) ?? false })
        {
            throw answer(
                .forbidden, code: "source_not_allowed",
                message: "unsigned media URLs are served only for sources under --url-allow-source; sign the URL "
                    + "(HMAC-SHA256 with --url-key and --url-salt) or allow the source's prefix",
                profile: profile.id)
        }
        return (url, names, signedBy, profile)
    }

    /// The key whose signature `signature` is, or nil for an unsigned word (checked against the
    /// allow-list once the source is read). 403 before anything is fetched otherwise.
    private func verify(_ signature: String, _ signedPath: String, keys: [MediaURLKey]) throws -> MediaURLKey? {
        if MediaURL.unsignedWords.contains(signature) { return nil }
        if let key = keys.first(where: { $0.verifies(signature, for: signedPath) }) { return key }
        throw answer(
            .forbidden, code: "invalid_signature",
            message: keys.isEmpty
                ? "this server has no --url-key: only unsigned media URLs (insecure/…) for allowed sources"
                : "the signature does not match the path: it must be the URL-safe Base64 of HMAC-SHA256(key, salt + "
                    + "the path after the signature)",
            profile: "unknown")
    }

    /// A URL without an extension: the same URL with the extension of what the profile made,
    /// signed again with the key that signed it (the path changes).
    private func redirect(
        _ url: MediaURL, to entry: CacheEntry, signedBy key: MediaURLKey?, query: String?, profile: String
    ) -> Response {
        let ext = String(entry.attachment.name.split(separator: ".").last ?? "jpg")
        let path = url.signedPath(withExtension: ext)
        let signature = key?.sign(path) ?? url.signature
        metrics.mediaURL(profile: profile, outcome: "extension_redirect")
        return Response(
            status: .found,
            headers: [
                .location: "/" + signature + path + (query.map { "?" + $0 } ?? ""),
                .cacheControl: "public, max-age=\(lifetime(entry.freshUntil))", .contentLength: "0",
                .pushMediaOutcome: "redirect/extension",
            ])
    }

    /// 307 to the source, so the phone tries the original as it would have without PushMedia (the
    /// job goes on for the next phone); never to an address the SSRF rule denies.
    private func redirectToSource(_ source: String, reason: String, message: String, profile: String) async throws
        -> Response
    {
        guard await pipeline.allowsRedirect(to: source) else {
            var error = answer(
                .forbidden, code: "blocked_address",
                message: "\(message); the source's host does not resolve, or resolves to an internal address, so "
                    + "there is no redirect to it",
                profile: profile)
            error.headers[.cacheControl] = "no-store"
            throw error
        }
        metrics.mediaURL(profile: profile, outcome: "source_redirect")
        return Response(
            status: .temporaryRedirect,
            headers: [
                .location: Self.asciiURL(source), .cacheControl: "no-store", .contentLength: "0",
                .pushMediaOutcome: "redirect/\(reason)",
            ])
    }

    /// The error answer for a path that is not a media URL this server takes.
    private func refused(_ error: MediaURLError) -> APIError {
        let status: HTTPResponse.Status =
            switch error {
            case .notAMediaURL: .notFound
            case .tooLong: .uriTooLong
            default: .badRequest
            }
        return answer(status, code: error.code, message: error.description, profile: "unknown")
    }

    /// An error answer, counted.
    private func answer(_ status: HTTPResponse.Status, code: String, message: String, profile: String) -> APIError {
        metrics.mediaURL(profile: profile, outcome: status.code < 500 ? "refused" : "failed")
        var error = APIError(status, code: code, message: message)
        error.headers[.cacheControl] = "no-store"
        return error
    }

    /// The status for a source that cannot be delivered, as imgproxy answers, and whether a cache
    /// may keep the answer for a minute (what the origin holds, not whether it answered).
    static func status(forFailure reason: String) -> (HTTPResponse.Status, cacheable: Bool) {
        if reason.hasPrefix("http_"), let code = Int(reason.dropFirst(5)) {
            return (400..<500).contains(code) ? (HTTPResponse.Status(code: code), true) : (.badGateway, false)
        }
        switch reason {
        case "blocked_address": return (.forbidden, false)
        case "invalid_url", "unsupported_scheme": return (.badRequest, false)
        case "dns_failed": return (.notFound, false)
        case "timeout", "connect_failed", "fetch_failed", "too_many_redirects": return (.badGateway, false)
        case "store_failed", "internal_error": return (.internalServerError, false)
        default: return (.unprocessableContent, true)
        }
    }

    /// Seconds a cache may keep an answer made from an entry fresh until `freshUntil`: its
    /// freshness left by the store's clock (the store's rules: the origin's, within --min-ttl and
    /// --max-ttl; 0 for a stale entry).
    private func lifetime(_ freshUntil: Int64?) -> Int64 {
        CacheEntry.secondsFresh(until: freshUntil, at: pipeline.store.now)
    }

    /// `url` with every byte of a non-ASCII character percent-encoded, for a header.
    static func asciiURL(_ url: String) -> String {
        var text = ""
        for scalar in url.unicodeScalars {
            if scalar.isASCII {
                text.unicodeScalars.append(scalar)
            } else {
                for byte in String(scalar).utf8 { text += "%" + String(byte, radix: 16, uppercase: true) }
            }
        }
        return text
    }

    /// `<the source's file name without its extension>.<ext>`, in a few safe characters: what
    /// SDKs that name the download after `Content-Disposition` save it as.
    static func fileName(_ source: SourceParts?, format: MediaFormat) -> String {
        let path = source?.path ?? ""
        let last = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { path[path.index(after: $0)...] } ?? path[...]
        let decoded = MediaURL.percentDecoded(last) ?? String(last)
        let stem = decoded.split(separator: ".", omittingEmptySubsequences: false).dropLast().joined(separator: ".")
        let base = (stem.isEmpty ? decoded : stem).filter {
            $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0))
        }
        return (base.isEmpty ? "media" : String(base.prefix(64))) + "." + format.fileExtension
    }
}

extension HTTPField.Name {
    static let contentDisposition = Self("Content-Disposition")!
}
