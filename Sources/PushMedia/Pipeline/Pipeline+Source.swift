import Foundation

extension Pipeline {
    /// Where a media reference points, once checked.
    enum Source: Sendable {
        case remote(String)
        /// A real path inside the media root, with its size and modification time for the cache key.
        case local(path: String, identity: String)

        var identity: String {
            switch self {
            case let .remote(url): url
            case let .local(_, identity): identity
            }
        }

        /// Remote results have a freshness lifetime; a local file's key names its version.
        var isRemote: Bool {
            if case .remote = self { return true }
            return false
        }
    }

    /// http(s) references already found valid, as written → as fetched: parsing a URL with
    /// Foundation costs more than the rest of a cache hit's lookup. The 10,000 most recent.
    final class ValidURLs: Sendable {
        private let urls = Locked(LRUCache<String, String>(budget: 10_000))

        subscript(written: String) -> String? { urls.withLock { $0.value(forKey: written) } }

        func remember(_ written: String, as fetched: String) {
            urls.withLock { _ = $0.setValue(fetched, forKey: written) }
        }
    }

    /// Longest media URL accepted.
    static let maxURLLength = 8192

    /// The source a slot names: an http(s) URL, or a local file inside the media root.
    func resolveSource(_ slot: MediaSlot, context: PayloadContext) -> Result<Source, Failure> {
        guard let text = slot.value.stringValue else {
            return .failure(
                Failure(
                    reason: ReasonCode.invalidMediaReference,
                    message: "\"\(slot.source)\" holds \(slot.value.kindName), not a URL string"))
        }
        if let valid = validURLs[text] { return .success(.remote(valid)) }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else {
            return .failure(Failure(reason: ReasonCode.invalidURL, message: "\"\(slot.source)\" is empty"))
        }
        guard trimmed.utf8.count <= Self.maxURLLength else {
            let message = "the URL is \(trimmed.utf8.count) bytes long, over the \(Self.maxURLLength)-byte limit"
            return .failure(Failure(reason: ReasonCode.invalidURL, message: message))
        }
        let scheme = Self.scheme(of: trimmed)
        switch scheme {
        case "http"?, "https"?:
            return remoteSource(text, trimmed: trimmed)
        case nil, "file"?:
            guard let root = context.mediaRoot ?? config.mediaRoot else {
                return .failure(
                    Failure(
                        reason: scheme == nil ? ReasonCode.invalidURL : ReasonCode.unsupportedScheme,
                        message: "local media references are only read by `pushmedia process` and "
                            + "`batch`; use an http(s) URL"))
            }
            return Self.localSource(trimmed, root: root)
        case let other?:
            return .failure(
                Failure(
                    reason: ReasonCode.unsupportedScheme,
                    message: FetchError.unsupportedScheme(other).description))
        }
    }

    /// An http(s) URL (`trimmed`, as `text` was written), checked and remembered.
    func remoteSource(_ text: String, trimmed: String) -> Result<Source, Failure> {
        guard let components = URLComponents(string: trimmed), let host = components.host, !host.isEmpty else {
            return .failure(Failure(reason: ReasonCode.invalidURL, message: "not a valid http(s) URL"))
        }
        guard components.user == nil && components.password == nil else {
            return .failure(
                Failure(
                    reason: ReasonCode.invalidURL,
                    message: "credentials in the URL (user:password@) are refused: they would be "
                        + "sent to whatever the URL redirects to"))
        }
        validURLs.remember(text, as: trimmed)
        return .success(.remote(trimmed))
    }

    /// A local file inside `root`, its identity naming its size and modification time.
    private static func localSource(_ reference: String, root: String) -> Result<Source, Failure> {
        do {
            let path = try LocalSource.resolve(reference, root: root)
            var info = stat()
            stat(path, &info)
            let version = "\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
            return .success(.local(path: path, identity: "file:\(path):\(version)"))
        } catch {
            return .failure(Failure(reason: error.reason, message: error.description))
        }
    }

    /// The scheme of `text` if it starts with one (`scheme:`), lowercased.
    static func scheme(of text: String) -> String? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let candidate = text[..<colon]
        guard let first = candidate.first, first.isASCII, first.isLetter,
            candidate.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else {
            return nil
        }
        return candidate.lowercased()
    }

    /// The options fingerprint of a reference made for `profile`: the one computed at start for a
    /// platform's own profile, computed now for a template image's (`PlatformProfile.variant`).
    func fingerprint(of profile: PlatformProfile) -> String {
        if profile.variant == nil, let known = fingerprints[profile.id] { return known }
        return Self.optionsFingerprint(config, profile: profile)
    }

    /// Everything that changes the output for the same source, made for `profile`.
    static func optionsFingerprint(_ config: PushMediaConfig, profile: PlatformProfile? = nil) -> String {
        let p = profile ?? config.profile
        return "profile=\(p.id);edge=\(config.longEdge);video=\(config.videoEdge),\(config.clipSeconds);"
            + "thumb=\(config.thumbnailEdge);px=\(config.maxPixels);frames=\(config.maxFrames);"
            + "q=\(config.jpegQuality);src=\(config.maxSourceBytes);"
            + "caps=\(p.maxImageBytes)/\(p.maxAudioBytes)/\(p.maxVideoBytes);"
            + "crop=\(config.crop.rawValue);clip=\(config.thumbnailAspect.map { String($0) } ?? "none");"
            + "private=\(config.allowPrivateNetworks);trusted=\(config.trustedPeers.sorted().joined(separator: ","))"
            + (p.delivers.map { ";as=\($0.id)" } ?? "")
            + (p.variant.map { ";template=\($0),\(p.aspect ?? 0),\(p.longEdge ?? 0)" } ?? "")
    }
}
