import Foundation

/// What a media URL asks of the pipeline: one source, made for one platform, in one format.
public struct DeliveryRequest: Sendable {
    /// The http(s) URL of the source.
    public var source: String
    public var profile: PlatformProfile
    /// The format asked for; nil: what the profile makes of the source (the same entry as
    /// `/v1/process` fills).
    public var format: MediaFormat?
    /// A new value makes a new entry, so a new fetch.
    public var cacheBuster: String?
    public var budget: Duration
    /// Revalidate a cached result with its origin.
    public var refresh = false

    public init(
        source: String, profile: PlatformProfile, format: MediaFormat? = nil, cacheBuster: String? = nil,
        budget: Duration, refresh: Bool = false
    ) {
        self.source = source
        self.profile = profile
        self.format = format
        self.cacheBuster = cacheBuster
        self.budget = budget
        self.refresh = refresh
    }
}

/// How a media URL's request ended.
public enum Delivery: Sendable, Equatable {
    /// The attachment, in the format asked. `cacheHit`: made before this request.
    case ready(CacheEntry, cacheHit: Bool)
    /// The budget ran out before the attachment was ready; the job goes on. `preview`: the
    /// thumbnail (a JPEG) made so far, if any.
    case notReady(reason: String, message: String, preview: StoredFile?)
    /// The source cannot be delivered in this format: `reason` is the outcome's (`http_404`,
    /// `unsupported_type`, `blocked_address`, …).
    case failed(reason: String, message: String)
}

extension Pipeline {
    /// Makes (or finds) the attachment a media URL asks for, within `request.budget`. A fresh
    /// entry that `/v1/process` or `/v1/batch` made for the same source and profile answers when
    /// its attachment is in the format asked; otherwise the entry of the source made in that
    /// format, shared with the requests asking the same at the same time (one job), which goes on
    /// after the budget (`backgroundLimit`) so that the next request finds it.
    public func deliver(_ request: DeliveryRequest) async -> Delivery {
        let source: Source
        // A source checked before is remembered, as a payload's reference is (`resolveSource`).
        if let valid = validURLs[request.source] {
            source = .remote(valid)
        } else {
            let text = request.source.trimmingCharacters(in: .whitespaces)
            guard ["http", "https"].contains(Self.scheme(of: text)), text.utf8.count <= Self.maxURLLength else {
                return .failed(reason: ReasonCode.invalidURL, message: "the source must be an http(s) URL")
            }
            switch remoteSource(request.source, trimmed: text) {
            case let .success(remote): source = remote
            case let .failure(failure): return .failed(reason: failure.reason, message: failure.message)
            }
        }
        let profile: PlatformProfile
        let fingerprint: String
        if let format = request.format {
            if request.profile.variant == nil, let known = delivering[request.profile.id]?[format] {
                (profile, fingerprint) = known
            } else if let made = request.profile.delivering(format) {
                (profile, fingerprint) = (made, Self.optionsFingerprint(config, profile: made))
            } else {
                let shown = request.profile.acceptedFormats.map(\.fileExtension).sorted().joined(separator: ", ")
                return .failed(
                    reason: ReasonCode.unsupportedType,
                    message:
                        "the \(request.profile.id) profile does not show .\(format.fileExtension) (\(format.mime)); "
                        + "it shows \(shown)")
            }
        } else {
            profile = request.profile
            fingerprint = self.fingerprint(of: profile)
        }
        let identity = source.identity + (request.cacheBuster.map { "\ncb=" + $0 } ?? "")
        // The profile's own entry (what the hook makes of the same source) answers when it is in the format asked.
        let alternate = request.format.flatMap { format in
            request.cacheBuster == nil && request.profile.variant == nil
                ? fingerprints[request.profile.id].map { (options: $0, mime: format.mime) } : nil
        }
        let (resolution, _) = await resolve(
            MediaRequest(
                key: MediaStore.cacheKey(source: identity, options: fingerprint), source: source, profile: profile,
                refresh: request.refresh, deadline: .now + request.budget, alternate: alternate))
        switch resolution {
        case let .ready(entry, cacheHit):
            return .ready(entry, cacheHit: cacheHit)
        case let .renewed(entry), let .stale(entry, _):
            return .ready(entry, cacheHit: true)
        case let .failed(reason, message, _):
            return .failed(reason: reason, message: message)
        case let .notReady(progress):
            let why =
                progress.started
                ? "the budget of \(request.budget) ran out; the job goes on"
                : "the budget of \(request.budget) ran out while the job waited for a free slot"
            return .notReady(reason: ReasonCode.budgetExceeded, message: why, preview: progress.thumbnail)
        case let .overloaded(why):
            return .notReady(reason: ReasonCode.overloaded, message: why, preview: nil)
        case let .storeUnavailable(why, _):
            return .notReady(reason: ReasonCode.storeUnavailable, message: why, preview: nil)
        }
    }
}

extension Pipeline {
    /// Whether a client may be sent to `url` (a redirect to a media URL's source when its
    /// attachment is not ready): the host resolves, and only to addresses the SSRF rule would let
    /// a fetch connect to (`AddressPolicy`). Never a redirect to a denied address.
    public func allowsRedirect(to url: String) async -> Bool {
        guard let parts = SourceParts(url), !parts.hasCredentials else { return false }
        let (allowPrivate, trusted) = (config.allowPrivateNetworks, Set(config.trustedPeers))
        return await io.run {
            AddressPolicy.allowsEvery(host: parts.host, port: parts.port, allowPrivate: allowPrivate, trusted: trusted)
                == true
        }
    }
}
