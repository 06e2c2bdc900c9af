import Foundation

/// Per-payload settings that differ from the configuration.
public struct PayloadContext: Sendable {
    /// Directory that local media references (relative paths, `file:` URLs) must resolve inside;
    /// nil refuses them (the HTTP hook never reads local files).
    public var mediaRoot: String?
    /// Where the payload came from (a file path), named in messages.
    public var label: String?
    /// Overrides the configured budget.
    public var budget: Duration?
    /// Overrides the configured `on-reject`.
    public var onReject: OnReject?
    /// Overrides the configured base URL (a server learns its port only once it listens).
    public var baseURL: String?
    /// Overrides the deadline (a batch shares one).
    public var deadline: ContinuousClock.Instant?
    /// Overrides the configured vendor (nil: the configured one, or detection).
    public var vendor: Vendor?
    /// Overrides the configured platform profile.
    public var profile: PlatformProfile?
    /// Revalidate remote media with their origins even when the cached result is fresh (a
    /// conditional request: an unchanged source still costs no transcode).
    public var refresh = false

    /// Every setting left nil follows the configuration.
    public init(
        mediaRoot: String? = nil, label: String? = nil, budget: Duration? = nil, onReject: OnReject? = nil,
        baseURL: String? = nil, deadline: ContinuousClock.Instant? = nil, vendor: Vendor? = nil,
        profile: PlatformProfile? = nil, refresh: Bool = false
    ) {
        self.refresh = refresh
        self.mediaRoot = mediaRoot
        self.label = label
        self.budget = budget
        self.onReject = onReject
        self.baseURL = baseURL
        self.deadline = deadline
        self.vendor = vendor
        self.profile = profile
    }
}

/// A rewritten payload and its outcome.
public struct PipelineResult: Sendable {
    /// The payload to send: the input with its media references rewritten.
    public var payload: JSONObject
    /// The payload as compact JSON, as it would be sent to APNs.
    public var bytes: [UInt8]
    /// What became of the payload's media.
    public var outcome: Outcome
    /// Until when (Unix seconds) the cached results it used stay fresh; nil when none expire.
    public var freshUntil: Int64?
    /// The cache entries the delivered references used: for an answer kept ready, which holds
    /// while each is still remembered with the same attachment (`Pipeline.stillRemembered`).
    public var used: [UsedEntry] = []
}

/// A cache entry a result used: its key, its attachment's stored name, and whether its source is
/// remote (its freshness then has a lifetime).
public struct UsedEntry: Sendable, Hashable {
    public var key: String
    public var attachment: String
    public var remote: Bool
}

/// How `Pipeline.begin` left a payload: answered, or with references for `Pipeline.finish`.
public enum PipelineStart: Sendable {
    case done(PipelineResult)
    case pending(PendingPayload)
}

/// A payload whose references need the cache's index or a job (`Pipeline.finish`).
public struct PendingPayload: Sendable {
    let slots: Pipeline.Slots
    let context: PayloadContext
}

/// Input that is not a payload at all.
public enum PayloadError: Error, Sendable, CustomStringConvertible {
    case invalidJSON(JSONParseError)
    /// Valid JSON of another kind, named ("an array", …).
    case notAnObject(String)

    /// The outcome's reason code: `invalid_json` or `not_an_object`.
    public var reason: String {
        switch self {
        case .invalidJSON: ReasonCode.invalidJSON
        case .notAnObject: ReasonCode.notAnObject
        }
    }

    public var description: String {
        switch self {
        case let .invalidJSON(error): "invalid JSON: \(error)"
        case let .notAnObject(kind): "a payload must be a JSON object, got \(kind)"
        }
    }
}
