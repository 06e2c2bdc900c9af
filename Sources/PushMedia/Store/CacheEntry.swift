import Foundation

/// A file in the store, named `<sha256>.<ext>` after its content and sniffed type.
public struct StoredFile: Codable, Sendable, Equatable {
    public var name: String
    public var mime: String
    public var uti: String?
    public var bytes: Int64
    public var width: Int?
    public var height: Int?
}

/// A cached result: what the pipeline made of one source under one set of options.
public struct CacheEntry: Codable, Sendable, Equatable {
    /// `processed`, `passthrough`, or `best_attempt` (with `reason` and `message`: e.g. a
    /// video's poster frame instead of a video the platform cannot play). Encoded as those strings.
    public var status: OutcomeStatus
    public var reason: String?
    public var message: String?
    public var attachment: StoredFile
    public var thumbnail: StoredFile?
    public var sourceMIME: String
    public var sourceBytes: Int64
    public var pipeline: Int
    /// The profile's square icon (Web Push).
    public var icon: StoredFile?
    /// The thumbnail clipping rectangle computed for `--thumb-aspect`.
    public var clip: ClipRect?
    /// For an animation, the frame to show as its thumbnail.
    public var frame: Int?
    /// For a remote source: until when (Unix seconds) the result is used without asking the
    /// origin again (see `FreshnessPolicy`); nil for a local file (its key names its version).
    public var freshUntil: Int64?
    /// When the origin last confirmed or supplied the source (Unix seconds).
    public var checkedAt: Int64?
    /// The origin's validators, for a conditional request once the entry is stale.
    public var etag: String?
    public var lastModified: String?
    /// SHA-256 of the source bytes: a refetch that brings the same bytes renews the entry
    /// without transcoding again.
    public var sourceSHA256: String?
    /// The source it was made from, as `MediaStore.sourceID` names it (a digest, never the URL):
    /// `purge` finds a source's entries by it whatever options made them. Nil in entries
    /// written before it was recorded.
    public var sourceID: String?

    public init(
        status: OutcomeStatus, attachment: StoredFile, thumbnail: StoredFile?, sourceMIME: String,
        sourceBytes: Int64, pipeline: Int,
        icon: StoredFile? = nil, clip: ClipRect? = nil, frame: Int? = nil
    ) {
        self.status = status
        self.attachment = attachment
        self.thumbnail = thumbnail
        self.sourceMIME = sourceMIME
        self.sourceBytes = sourceBytes
        self.pipeline = pipeline
        self.icon = icon
        self.clip = clip
        self.frame = frame
    }

    /// Every stored file the entry names.
    public var files: [StoredFile] { [attachment] + [thumbnail, icon].compactMap { $0 } }

    /// The validators to send when revalidating.
    public var validators: OriginValidators { OriginValidators(etag: etag, lastModified: lastModified) }

    /// This entry confirmed by its origin at `now` under `validators` (new ones replace the old).
    func renewed(_ validators: OriginValidators, policy: FreshnessPolicy, now: Date) -> CacheEntry {
        var entry = self
        entry.stamp(validators, policy: policy, now: now)
        return entry
    }

    mutating func stamp(_ validators: OriginValidators, policy: FreshnessPolicy, now: Date) {
        checkedAt = Int64(now.timeIntervalSince1970)
        freshUntil = Int64((now.timeIntervalSince1970 + policy.lifetime(validators, now: now)).rounded(.down))
        if validators.etag != nil || validators.lastModified != nil {
            etag = validators.etag
            lastModified = validators.lastModified
        }
    }

    enum CodingKeys: String, CodingKey {
        case status, reason, message, attachment, thumbnail, pipeline, icon, clip, frame, etag
        case sourceMIME = "source_mime"
        case sourceBytes = "source_bytes"
        case freshUntil = "fresh_until"
        case checkedAt = "checked_at"
        case lastModified = "last_modified"
        case sourceSHA256 = "source_sha256"
        case sourceID = "source_id"
    }
}
