import Foundation
import HTTPTypes
import Hummingbird
import PushMedia

/// `GET /preview`: a form to paste a payload into; `POST /preview` (form field `payload`, and
/// `app` for the app-name line): the payload goes through the same pipeline as
/// `POST /v1/process`, and the answer shows it as an iPhone lock-screen notification (and as an
/// Android one when the outcome has an Android, Huawei or web entry), with the rewritten
/// payload and the outcome.
///
/// A browser form cannot send a bearer token, so these routes take no auth; when tokens or an
/// HMAC secret are configured they answer 404 unless the server was started with `--preview`.
struct PreviewRoutes<Context: RequestContext>: Sendable {
    let pipeline: Pipeline
    /// Whether the page is on, and the body limit.
    let server: ServerConfig
    let metrics: ServerMetrics
    let baseURL: @Sendable () -> String

    func add(to router: Router<Context>) {
        router.get("preview", use: form)
        router.post("preview", use: preview)
    }

    var enabled: Bool { server.previewEnabled }

    @Sendable func form(_ request: Request, context: Context) async throws -> Response {
        guard enabled else { return Self.disabled() }
        return Self.page(PreviewPage(payload: "", appName: PreviewPage.defaultAppName))
    }

    @Sendable func preview(_ request: Request, context: Context) async throws -> Response {
        guard enabled else { return Self.disabled() }
        let limit = server.maxPayloadBodyBytes
        let body: [UInt8]
        do { body = try await ProcessRoutes<Context>.collect(request, limit: limit) } catch let error as APIError {
            var page = PreviewPage(payload: "", appName: PreviewPage.defaultAppName)
            page.error = "The form is too large: at most \(limit) bytes are accepted. \(error.message)."
            return Self.page(page, status: error.status)
        }
        guard let fields = Self.formFields(body) else {
            var page = PreviewPage(payload: "", appName: PreviewPage.defaultAppName)
            page.error = "The form could not be read: send it as application/x-www-form-urlencoded UTF-8."
            return Self.page(page, status: .badRequest)
        }
        let appName =
            fields["app"].flatMap {
                $0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty ? nil : String($0.prefix(64))
            }
            ?? PreviewPage.defaultAppName
        var page = PreviewPage(payload: fields["payload"] ?? "", appName: appName)
        guard let text = fields["payload"] else {
            page.error = "The form has no \"payload\" field: send the payload's JSON text in it."
            return Self.page(page, status: .badRequest)
        }
        // A form that was read answers 200 whatever its text: the page shows what is wrong with
        // it, next to the text to correct (the request itself was well formed).
        guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            page.error = "Paste a payload into the text box: the form field \"payload\" is empty."
            return Self.page(page)
        }
        let result: PipelineResult
        do {
            result = try await pipeline.process(
                Array(text.utf8), context: PayloadContext(label: "preview", baseURL: baseURL()))
        } catch {
            page.error = "Not a payload: \(error.description)"
            return Self.page(page)
        }
        metrics.record(result.outcome)
        page.result = PreviewPage.Result(payload: result.payload, bytes: result.bytes.count, outcome: result.outcome)
        var response = Self.page(page)
        response.headers[.pushMediaOutcome] = result.outcome.label
        return response
    }

    static func page(_ page: PreviewPage, status: HTTPResponse.Status = .ok) -> Response {
        html(page.render(), policy: page.policy, status: status)
    }

    static func disabled() -> Response {
        let body = """
            <h1>Preview is off</h1>
            <p>This server requires a bearer token or a signed request on <code>/v1</code>, and a browser form cannot send
            either, so the preview page is not served. Start <code>pushmedia serve</code> with <code>--preview</code>
            (or <code>PUSHMEDIA_PREVIEW=1</code>) to serve it anyway: it then processes payloads for anyone who can reach the server.</p>
            """
        let policy = HTML.contentSecurityPolicy(mediaSources: [])
        return html(
            HTML.page(title: "PushMedia preview is off", css: PreviewPage.css, policy: policy, body: body),
            policy: policy, status: .notFound)
    }

    static func html(_ text: String, policy: String, status: HTTPResponse.Status) -> Response {
        let bytes = Array(text.utf8)
        return Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8", .contentLength: String(bytes.count),
                .cacheControl: "no-store",
                .contentSecurityPolicy: policy + "; frame-ancestors 'none'", .xContentTypeOptions: "nosniff",
                .referrerPolicy: "no-referrer",
            ],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// `application/x-www-form-urlencoded` fields (`+` is a space, `%XX` a byte); the first of a
    /// repeated name wins. Nil when the body is not UTF-8 or has a broken `%` escape.
    static func formFields(_ body: [UInt8]) -> [String: String]? {
        guard let text = String(validating: body, as: UTF8.self) else { return nil }
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : "") else { return nil }
            if fields[name] == nil { fields[name] = value }
        }
        return fields
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}

/// The preview page: the form, then (after a POST) the cards, the rewritten payload and the outcome.
struct PreviewPage {
    static let defaultAppName = "Your app"

    /// What the pipeline gave: the rewritten payload, its size as sent, and the outcome.
    struct Result {
        var payload: JSONObject
        var bytes: Int
        var outcome: Outcome
    }

    /// The text in the form.
    var payload: String
    var appName: String
    var result: Result?
    var error: String?

    init(payload: String, appName: String) {
        self.payload = payload
        self.appName = appName
    }

    /// The cards shown: iOS always; Android beside it when an entry is for Android, Huawei or the web.
    var cards: [NotificationCard] {
        guard let result else { return [] }
        let entries = result.outcome.mediaEntries
        let ios = entries.first { $0.platform.lowercased() == "ios" } ?? entries.first { !$0.isAndroidLike }
        var cards = [
            NotificationCard(
                style: .ios, appName: appName, text: NotificationText.find(in: result.payload, platform: "ios"),
                entry: ios)
        ]
        if ios == nil && !entries.isEmpty { cards[0].note = "no media entry for iOS" }
        if let android = entries.first(where: \.isAndroidLike) {
            cards.append(
                NotificationCard(
                    style: .android, appName: appName,
                    text: NotificationText.find(in: result.payload, platform: android.platform.lowercased()),
                    entry: android))
        }
        for index in cards.indices { cards[index].showTemplate(of: entries) }
        return cards
    }

    /// Media may come from this server and from wherever the attachments' URLs point (the base URL).
    var policy: String {
        let origins = cards.flatMap { card in
            ([card.media].compactMap { $0 } + card.pages).compactMap { HTML.origin(of: $0.source) }
        }
        var sources = ["'self'"]
        for origin in origins where !sources.contains(origin) { sources.append(origin) }
        return HTML.contentSecurityPolicy(mediaSources: sources, formAction: true)
    }

    func render() -> String {
        var body = """
            <h1>Notification preview</h1>
            <p class="how">Paste a push payload (APNs JSON, an FCM <code>message</code>, Airship, OneSignal, …) whose media is an
            <code>http</code> or <code>https</code> URL, and press <b>Preview</b>. It goes through the same pipeline as
            <code>POST /v1/process</code>: the media is fetched, checked, converted and stored here, and the page shows the
            notification as an iPhone lock screen would (the attachment's thumbnail in the banner, the attachment large below,
            as when the notification is expanded) and, when the payload has an Android part, as Android would, followed by the
            rewritten payload and the outcome. The text comes from <code>aps.alert</code>, FCM's <code>notification</code>
            blocks or Airship's <code>media_attachment.content</code>. Local file paths are not read here.</p>
            <form method="post" action="preview" accept-charset="utf-8">
            <label for="payload">Payload (JSON)</label>
            <textarea id="payload" name="payload" rows="14" spellcheck="false" placeholder="\(HTML.escape(Self.placeholder))">\(HTML.escape(payload))</textarea>
            <div class="controls"><label for="app">App name</label> <input id="app" name="app" value="\(HTML.escape(appName))" maxlength="64">
            <button type="submit">Preview</button></div>
            </form>

            """
        if let error { body += "<p class=\"error\" role=\"alert\">\(HTML.escape(error))</p>\n" }
        if let result {
            let outcome = result.outcome
            body +=
                "<section class=\"result\" data-status=\"\(outcome.status.rawValue)\">\n<h2>Result</h2>\n<p class=\"status\">"
            body += "<span class=\"badge status-\(outcome.status.rawValue)\">\(outcome.status.rawValue)</span>"
            if let reason = outcome.reason { body += " <code>\(HTML.escape(reason))</code>" }
            if let vendor = outcome.vendor { body += " · vendor \(HTML.escape(vendor))" }
            body += "</p>\n"
            if let message = outcome.message { body += "<p class=\"message\">\(HTML.escape(message))</p>\n" }
            for warning in outcome.warnings ?? [] { body += "<p class=\"warning\">⚠ \(HTML.escape(warning))</p>\n" }
            body += "<div class=\"cards\">\n" + cards.map { $0.html() }.joined() + "</div>\n"
            let pretty = String(decoding: JSONValue.object(result.payload).prettySerialized(), as: UTF8.self)
            body +=
                "<h2>Rewritten payload <small>(\(result.bytes) bytes as sent)</small></h2>\n<pre class=\"payload\">\(HTML.escape(pretty))</pre>\n"
            body +=
                "<h2>Outcome</h2>\n<pre class=\"outcome\">\(HTML.escape(Self.outcomeJSON(outcome)))</pre>\n</section>\n"
        }
        return HTML.page(
            title: "PushMedia preview", css: Self.css + "\n" + NotificationCard.css, policy: policy, body: body)
    }

    static func outcomeJSON(_ outcome: Outcome) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(outcome)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static let placeholder = """
        {"aps": {"alert": {"title": "Spring deals", "body": "Up to 40% off"}, "mutable-content": 1},
         "media_url": "https://cdn.shop.example/banner"}
        """

    static let css = """
        body { font-family: -apple-system, "Helvetica Neue", "Liberation Sans", Arial, sans-serif; margin: 24px auto; max-width: 980px; padding: 0 16px; color: #1d1d1f; }
        .how { color: #444; line-height: 1.45; }
        textarea { width: 100%; box-sizing: border-box; font-family: "DejaVu Sans Mono", Menlo, monospace; font-size: 13px; }
        .controls { margin-top: 8px; display: flex; gap: 8px; align-items: center; }
        button { padding: 6px 18px; font-size: 15px; }
        .error { background: #ffdcdc; color: #8f1111; padding: 10px; border-radius: 6px; }
        .warning { color: #8a5a00; }
        .message { color: #333; overflow-wrap: anywhere; }
        .cards { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; margin: 16px 0; }
        pre { background: #f4f4f4; padding: 12px; overflow: auto; font-size: 12px; max-height: 480px; }
        .badge { display: inline-block; padding: 2px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
        .status-processed { background: #d8f5de; color: #0b5d1e; }
        .status-passthrough { background: #dcebff; color: #0b3d91; }
        .status-best_attempt { background: #fff1cc; color: #7a5200; }
        .status-rejected { background: #ffdcdc; color: #8f1111; }
        .status-skipped { background: #ececec; color: #444; }
        """
}

extension HTTPField.Name {
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
}
