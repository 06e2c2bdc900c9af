import Foundation

/// What one job knows as it goes through its steps (`Pipeline.runJob`): what it was asked,
/// what the steps found and made, and the time spent in each stage.
struct JobContext: Sendable {
    let source: Pipeline.Source
    /// The cache key the entry is recorded under.
    let key: String
    let profile: PlatformProfile
    let transcoder: Transcoder
    /// A video's poster frame time, given with the media.
    let posterTime: Double?
    /// The stale entry being revalidated, if any: a 304, or the same bytes again, renew it.
    let previous: CacheEntry?
    /// Past it, no new work starts.
    let deadline: ContinuousClock.Instant
    /// What the job has achieved, read should the payload's budget run out.
    let progress: Locked<JobProgress>
    /// The download; other work files are named after it.
    let temporary: String
    /// The fleet's lease the job runs under (nil: no fleet, or it cannot be reached).
    let lease: FleetLease?

    let started = ContinuousClock.now
    var timings = StageTimings()
    /// When the stage being timed began.
    var clock = ContinuousClock.now

    // Found by fetch and sniff.
    var bytes: Int64 = 0
    /// The origin's HTTP status, and its first byte's time in milliseconds (remote sources only).
    var fetchStatus: Int?
    var firstByte: Int?
    /// The origin's validators (remote sources only): they stamp the entry's freshness.
    var validators: OriginValidators?
    /// SHA-256 of a remote source, to recognise the same bytes when it is fetched again.
    var sourceHash: String?
    /// The fetch's hash of the download, made while it streamed.
    var streamedHash: String?
    /// Set by the sniff step, read by the steps after it.
    var sniff: SniffResult!

    // Decided.
    var decision = MediaDecision.passthrough
    /// An image's header (set by its decide step) and the file it is decoded from (a BMP is
    /// converted to TIFF first).
    var header: ImageHeader!
    var decodable: String
    /// A still image, decoded once for its thumbnail and its attachment.
    var decoded: DecodedImage?
    /// A video's streams, read once: for the codec check, the poster frame and the transcode.
    var probed: Result<VideoInfo, VideoError>?
    /// Whether FFmpeg is installed.
    var hasFFmpeg = false

    /// Made by the transcode steps, to be stored by the store step.
    var made = MadeFiles()
    var stored = StoredFiles()
    /// How the entry is recorded.
    var status = OutcomeStatus.processed
    var reason: String?
    /// What was given up on the way, for the entry's message (the outcome's warnings).
    var notes: [String] = []
    var clip: ClipRect?
    var frame: Int?

    // Held until the job ends.
    var workFiles: [String]
    var heldDecodeMemory: Int64?
    var holdsTranscodeSlot = false

    init(
        source: Pipeline.Source, key: String, profile: PlatformProfile, transcoder: Transcoder, posterTime: Double?,
        previous: CacheEntry?, deadline: ContinuousClock.Instant, progress: Locked<JobProgress>, temporary: String,
        lease: FleetLease? = nil
    ) {
        self.source = source
        self.key = key
        self.profile = profile
        self.transcoder = transcoder
        self.posterTime = posterTime
        self.previous = previous
        self.deadline = deadline
        self.progress = progress
        self.temporary = temporary
        self.lease = lease
        decodable = temporary
        workFiles = [temporary]
    }

    /// Whether the source is a video whose streams FFmpeg can read.
    var readsStreams: Bool { sniff.format.kind == .video && hasFFmpeg }

    /// Whether a video gets a poster frame: its thumbnail (where the profile has thumbnails),
    /// or the image that goes out instead of a video that is transcoded or refused.
    /// A profile that shows no images (a media URL asking for audio or video) gets none.
    var needsPoster: Bool {
        guard case .success? = probed, profile.maxImageBytes > 0 else { return false }
        return profile.thumbnail || decision != .passthrough
    }

    /// Whether the decision is a transcode (of audio or video: FFmpeg's work).
    var needsTranscode: Bool {
        if case .transcode = decision { return true }
        return false
    }

    /// Adds the time since `clock` to `stage`, and starts the clock again.
    mutating func count(_ stage: WritableKeyPath<StageTimings, Double>) {
        timings[keyPath: stage] += clock.millisecondsElapsed
        clock = .now
    }

    /// The video's poster frame goes out instead of the video: the platform's image, or (where
    /// video plays) a best attempt.
    mutating func deliverPoster(_ poster: StoredFile, why: String) {
        stored.attachment = poster
        status = .processed
        guard profile.maxVideoBytes > 0 else { return }
        status = .bestAttempt
        reason = ReasonCode.videoPosterFallback
        notes.append(why + "; its poster frame is delivered instead")
    }

    /// The entry for what was stored, stamped with the source's freshness (from `now`) and identity.
    func entry(freshness: FreshnessPolicy, now: Date) throws -> CacheEntry {
        guard let attachment = stored.attachment else {
            throw Pipeline.Failure(reason: ReasonCode.internalError, message: "no attachment was stored")
        }
        var entry = CacheEntry(
            status: status, attachment: attachment, thumbnail: stored.thumbnail,
            sourceMIME: sniff.format.mime, sourceBytes: bytes, pipeline: PushMediaVersion.pipeline,
            icon: stored.icon, clip: clip, frame: frame)
        entry.reason = reason
        entry.sourceID = MediaStore.sourceID(source.identity)
        if !notes.isEmpty { entry.message = notes.joined(separator: "; ") }
        if let validators {
            entry.stamp(validators, policy: freshness, now: now)
            entry.sourceSHA256 = sourceHash
        }
        return entry
    }
}

/// What a job made, not stored yet.
struct MadeFiles: Sendable {
    /// A work file moved into the store as it is (the download itself, or FFmpeg's output).
    struct WorkFile: Sendable {
        var path: String
        var format: MediaFormat
        var width: Int?
        var height: Int?
        var sha256: String?
    }

    /// Encoded in memory, or a work file.
    enum Attachment: Sendable {
        case encoded(EncodedImage)
        case file(WorkFile)
    }

    var attachment: Attachment?
    var thumbnail: EncodedImage?
    /// The profile's square icon (Web Push).
    var icon: EncodedImage?
    /// A video's poster frame: the image that goes out should the video not be playable.
    var poster: EncodedImage?

    var isEmpty: Bool { attachment == nil && thumbnail == nil && icon == nil && poster == nil }
}

/// What a job stored.
struct StoredFiles: Sendable {
    var attachment: StoredFile?
    var thumbnail: StoredFile?
    var icon: StoredFile?
    var poster: StoredFile?

    /// These, with `other`'s files where it has them.
    func merging(_ other: StoredFiles) -> StoredFiles {
        StoredFiles(
            attachment: other.attachment ?? attachment, thumbnail: other.thumbnail ?? thumbnail,
            icon: other.icon ?? icon, poster: other.poster ?? poster)
    }
}
