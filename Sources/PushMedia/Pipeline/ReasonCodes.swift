/// The machine-readable reasons the pipeline itself gives in outcomes (`reason`). Other stages
/// bring their own (`FetchError.reason`, `MediaDecision.reject`, …).
enum ReasonCode {
    // The payload
    static let invalidJSON = "invalid_json"
    static let notAnObject = "not_an_object"
    static let noMedia = "no_media"
    static let noAlert = "no_alert"
    static let payloadTooLarge = "payload_too_large"

    // The media reference
    static let invalidMediaReference = "invalid_media_reference"
    static let invalidURL = "invalid_url"
    static let unsupportedScheme = "unsupported_scheme"
    static let unsupportedType = "unsupported_type"
    /// A page past its template's maximum count: removed, never fetched.
    static let tooManyPages = "too_many_pages"

    // The job
    static let budgetExceeded = "budget_exceeded"
    static let overloaded = "overloaded"
    static let stale = "stale"
    static let storeUnavailable = "store_unavailable"
    static let videoPosterFallback = "video_poster_fallback"
    static let internalError = "internal_error"

    // Fetch failures (`FetchError.reason`) that say the origin could not be asked, not what it holds
    static let timeout = "timeout"
    static let dnsFailed = "dns_failed"
    static let connectFailed = "connect_failed"
    static let fetchFailed = "fetch_failed"
    static let serverErrors = ["http_500", "http_502", "http_503", "http_504"]
    static let originUnavailable: Set<String> = Set([timeout, dnsFailed, connectFailed, fetchFailed] + serverErrors)
}

extension Pipeline {
    /// A failure with its reason code and a message a person can act on.
    struct Failure: ReasonedError {
        var reason: String
        var message: String
        var description: String { message }
    }
}
