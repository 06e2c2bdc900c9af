import Foundation

/// The whole pipeline: locate → fetch → sniff → policy → transcode → store → rewrite, within a
/// time budget. When the budget runs out, the best attempt so far is returned exactly once;
/// the job itself may go on for `backgroundLimit` to fill the cache. Concurrent payloads that
/// name the same source share one job.
public final class Pipeline: Sendable {
    /// The configuration it was made with.
    public let config: PushMediaConfig
    /// Where attachments and the cache index are kept.
    public let store: MediaStore
    let fetcher: Fetcher
    /// One transcoder per platform profile.
    let transcoders: [String: Transcoder]
    /// Threads for downloads (mostly waiting on the network).
    let io: BlockingExecutor
    /// Threads for libvips, libmagic, hashing and disk work.
    let cpu: BlockingExecutor
    /// One per core for the whole process, however many pipelines it has.
    static let sharedCPU = BlockingExecutor(name: "pushmedia-cpu",
                                            maxThreads: ProcessInfo.processInfo.activeProcessorCount)
    static let sharedIO = BlockingExecutor(name: "pushmedia-fetch", maxThreads: 64)
    /// The running job of each cache key.
    let inFlight = Locked<[String: SharedJob]>([:])
    /// Backpressure, when `config.maxJobs` is set.
    public let gate: JobGate?
    /// Bounds the memory of the decodes running at once (`config.decodeMemory`).
    public let decodeBudget: DecodeBudget
    /// Bounds the jobs past their fetch (`config.maxTranscodes`).
    let transcodeGate: JobGate?
    let optionsFingerprint: String
    /// The options fingerprint of each profile, part of its cache keys.
    let fingerprints: [String: String]
    /// http(s) references already found valid.
    let validURLs = ValidURLs()

    /// Opens the store named by `config` and sets up the executors, gates and transcoders.
    public init(config: PushMediaConfig) throws(StoreError) {
        self.config = config
        store = try MediaStore(config: config)
        io = Self.sharedIO
        cpu = Self.sharedCPU
        fetcher = Fetcher(executor: io)
        var profiles = PlatformProfile.profiles
        profiles[config.profile.id] = config.profile
        transcoders = profiles.mapValues { Transcoder(config: config, profile: $0) }
        fingerprints = profiles.mapValues { Self.optionsFingerprint(config, profile: $0) }
        gate = config.maxJobs.map { JobGate(limit: $0, queueLimit: config.maxQueuedJobs) }
        decodeBudget = DecodeBudget(limit: config.decodeMemory)
        transcodeGate = config.maxTranscodes.map { JobGate(limit: $0, queueLimit: .max) }
        optionsFingerprint = Self.optionsFingerprint(config)
    }

    /// Checks that the store works (for an object store: the endpoint answers, the credentials are
    /// accepted and the bucket exists), so that a command can refuse to start with a clear error.
    public func verifyStore(timeout: Duration = .seconds(10)) async throws(StoreError) {
        let store = self.store
        let result = await io.run { () -> StoreError? in
            do throws(StoreError) { try store.checkReady(deadline: .now + timeout) } catch { return error }
            return nil
        }
        if let result { throw result }
    }

    /// Removes the cached results for each of `urls` (under every profile, with this
    /// configuration's options), so that the next request fetches and processes it again. Other
    /// processes on the same store notice within `--index-cache-ttl`. Returns, per URL, how many
    /// entries there were.
    public func purge(urls: [String]) async throws(StoreError) -> [(url: String, entries: Int)] {
        let store = self.store
        let keys = urls.map { url in
            let identity = url.trimmingCharacters(in: .whitespaces)
            return (url, Set(fingerprints.values).map { MediaStore.cacheKey(source: identity, options: $0) })
        }
        let result = await io.run { () -> Result<[(url: String, entries: Int)], StoreError> in
            do throws(StoreError) {
                var counts: [(url: String, entries: Int)] = []
                for (url, keys) in keys {
                    counts.append((url, try store.purge(keys: keys, deadline: .now + .seconds(30)).count))
                }
                return .success(counts)
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Processes one payload given as JSON bytes.
    /// - Throws: `PayloadError` when the bytes are not a JSON object (nothing else throws).
    public func process(_ json: some Collection<UInt8>,
                        context: PayloadContext = PayloadContext()) async throws(PayloadError) -> PipelineResult {
        let value: JSONValue
        do { value = try JSONValue.parse(json) } catch { throw .invalidJSON(error) }
        guard case let .object(payload) = value else { throw .notAnObject(value.kindName) }
        return await processPayload(payload, context: context, sizeAtMost: json.count)
    }

    /// Processes one payload. Always returns a payload that keeps the input's text.
    public func process(_ payload: JSONObject, context: PayloadContext = PayloadContext()) async -> PipelineResult {
        await processPayload(payload, context: context, sizeAtMost: nil)
    }
}

extension Pipeline {
    /// Fetches, checks, transcodes and stores one source, and records the cache entry. With
    /// `previous` (a stale entry), the fetch is conditional: a 304, or the same bytes again,
    /// renew that entry without transcoding.
    func runJob(source: Source, key: String, profile: PlatformProfile, posterTime: Double?, previous: CacheEntry?,
                        deadline: ContinuousClock.Instant,
                        progress: Locked<JobProgress>) async -> JobResult {
        var timings = StageTimings()
        let jobStart = ContinuousClock.now
        let temporary = store.temporaryPath()
        defer { unlink(temporary) }
        func result(_ kind: JobResult.Kind) -> JobResult {
            timings.total = jobStart.millisecondsElapsed
            return JobResult(kind: kind, timings: timings)
        }
        do {
            // Fetch
            var clock = ContinuousClock.now
            let bytes: Int64
            var validators: OriginValidators?
            switch source {
            case let .remote(url):
                let conditions = previous.map(\.validators).flatMap { $0.canRevalidate ? $0 : nil }
                let response: FetchResponse
                do { response = try await fetcher.fetch(url, to: temporary, limits: FetchLimits(config: config), deadline: deadline,
                                                        revalidating: conditions) } catch {
                    if error == .deadlineExceeded { return result(.budgetExceeded) }
                    throw error
                }
                timings.fetch = clock.millisecondsElapsed
                if response.notModified, let previous {
                    return try await renew(previous, response.validators, key: key, deadline: deadline, result: result)
                }
                bytes = response.bytes
                validators = response.validators
            case let .local(path, _):
                let maxBytes = config.maxSourceBytes
                bytes = try await io.run { try LocalSource.copy(path, to: temporary, maxBytes: maxBytes) }
            }
            timings.fetch = clock.millisecondsElapsed
            if ContinuousClock.now >= deadline { return result(.budgetExceeded) }
            if let transcodeGate {
                if transcodeGate.reserve() == .queued, await !transcodeGate.wait(until: deadline) { return result(.budgetExceeded) }
            }
            defer { transcodeGate?.release() }

            // Sniff (and hash a remote source, to recognise the same bytes when it is fetched again)
            clock = .now
            let isRemote = source.isRemote
            let (sniff, sourceHash) = try await cpu.run { () throws -> (SniffResult, String?) in
                (try Sniffer.sniff(path: temporary), isRemote ? try? MediaStore.sha256(file: temporary) : nil)
            }
            if let previous, let sourceHash, previous.sourceSHA256 == sourceHash, let validators {
                timings.sniff = clock.millisecondsElapsed
                return try await renew(previous, validators, key: key, deadline: deadline, result: result)
            }
            /// Stamps a new entry with the source's freshness and identity.
            func fresh(_ entry: CacheEntry) -> CacheEntry {
                guard let validators else { return entry }
                var entry = entry
                entry.stamp(validators, policy: config.freshness, now: Date())
                entry.sourceSHA256 = sourceHash
                return entry
            }
            progress.withLock { $0.sniff = sniff; $0.sourceBytes = bytes }
            timings.sniff = clock.millisecondsElapsed

            // Policy, transcode, store
            let policy = profile
            if sniff.format.kind != .image {
                var decision = policy.decide(sniff, bytes: bytes)
                let tools = VideoFrames.available
                let frames = VideoFrames(maxPixels: config.maxPixels)
                // A video's streams, read once (ffprobe, in a child process these threads only
                // wait for): for the codec check, the poster frame and the transcode.
                let probed: Result<VideoInfo, VideoError>? = sniff.format.kind == .video && tools
                    ? await io.run { Result { () throws(VideoError) -> VideoInfo in try frames.probe(temporary, deadline: deadline) } } : nil
                // A container the platform takes can still hold a codec it cannot play (AV1 or
                // VP9 in MP4): the streams decide.
                if decision == .passthrough, case let .success(info)? = probed, !AVTranscoder.playableVideoCodecs.contains(info.videoCodec) {
                    decision = .transcode(why: "\(info.videoCodec) video (in \(sniff.format.mime)) is not a codec \(policy.source) attachments play")
                }
                // A video gets a poster frame: its thumbnail when it passes through or is
                // transcoded, the image that goes out when it cannot be played.
                var posterMade: (image: EncodedImage?, thumbnail: EncodedImage?)?
                if case let .success(info)? = probed, policy.thumbnail || decision != .passthrough {
                    clock = .now
                    posterMade = try? await posterImage(temporary, info: info, transcoder: transcoders[profile.id] ?? Transcoder(config: config, profile: profile),
                                                        full: decision != .passthrough, time: posterTime, deadline: deadline)
                    timings.transcode += clock.millisecondsElapsed
                }
                let poster = posterMade
                clock = .now
                let (image, small) = try await cpu.run { [store] () throws -> (StoredFile?, StoredFile?) in
                    (try poster?.image.map { try store.put($0.bytes, format: $0.format, width: $0.width, height: $0.height, deadline: deadline) },
                     try poster?.thumbnail.map { try store.put($0.bytes, format: .jpeg, width: $0.width, height: $0.height, deadline: deadline) })
                }
                timings.store += clock.millisecondsElapsed
                // Should the budget end during a transcode, the poster is the best attempt.
                if let posterFile = image ?? small { progress.withLock { $0.thumbnail = posterFile } }
                /// The poster instead of the video: the platform's image, or (where video plays) a best attempt.
                func posterResult(_ image: StoredFile, why: String) async throws -> JobResult {
                    var entry = CacheEntry(status: .processed, attachment: image, thumbnail: small, sourceMIME: sniff.format.mime,
                                           sourceBytes: bytes, pipeline: PushMediaVersion.pipeline)
                    if policy.maxVideoBytes > 0 {
                        entry.status = .bestAttempt
                        entry.reason = "video_poster_fallback"
                        entry.message = why + "; its poster frame is delivered instead"
                    }
                    return try await finishJob(fresh(entry), key: key, deadline: deadline, result: result)
                }
                switch decision {
                case let .reject(reason, message):
                    guard let image else { throw Failure(reason: reason, message: message) }
                    return try await posterResult(image, why: message)
                case let .transcode(why):
                    guard tools else {
                        throw Failure(reason: "unsupported_type", message: "\(why), and FFmpeg (ffmpeg, ffprobe) is not installed to transcode it")
                    }
                    let output = temporary + (sniff.format.kind == .video ? ".out.mp4" : ".out.m4a")
                    defer { unlink(output) }
                    let av = AVTranscoder(config: config)
                    let cap = policy.maxBytes(for: sniff.format.kind)
                    let video = probed ?? .failure(.unreadable("not probed"))
                    clock = .now
                    let made: AVTranscoder.Output
                    var format: MediaFormat = sniff.format.kind == .video ? .mp4 : .m4a
                    do {
                        if sniff.format.kind == .video {
                            let audioCap = policy.maxAudioBytes
                            let (output, isVideo) = try await io.run { () throws -> (AVTranscoder.Output, Bool) in
                                do {
                                    return (try av.video(temporary, info: try video.get(), maxBytes: cap, to: output, deadline: deadline), true)
                                } catch VideoError.unreadable("no video stream") where audioCap > 0 {
                                    // A WebM (or Matroska) of sound only: audio, then.
                                    let info = try frames.probe(temporary, audioOnly: true, deadline: deadline)
                                    return (try av.audio(temporary, info: info, maxBytes: audioCap, to: output, deadline: deadline), false)
                                }
                            }
                            made = output
                            if !isVideo { format = .m4a }
                        } else {
                            made = try await io.run { () throws -> AVTranscoder.Output in
                                try av.audio(temporary, info: try frames.probe(temporary, audioOnly: true, deadline: deadline), maxBytes: cap,
                                             to: output, deadline: deadline)
                            }
                        }
                    } catch let error as VideoError {
                        timings.transcode += clock.millisecondsElapsed
                        if error == .deadlineExceeded { return result(.budgetExceeded) }
                        if let image { return try await posterResult(image, why: "\(why), and transcoding failed (\(error))") }
                        throw Failure(reason: error.reason, message: "\(why); transcoding failed: \(error)")
                    }
                    timings.transcode += clock.millisecondsElapsed
                    clock = .now
                    let stored = try await cpu.run { [store, format] () throws -> StoredFile in
                        try store.adopt(output, format: format, deadline: deadline)
                    }
                    timings.store += clock.millisecondsElapsed
                    var entry = CacheEntry(status: .processed, attachment: stored, thumbnail: small, sourceMIME: sniff.format.mime,
                                           sourceBytes: bytes, pipeline: PushMediaVersion.pipeline)
                    if made.trimmed { entry.message = "cut to its first \(Int(made.seconds)) s to fit \(cap) bytes" }
                    return try await finishJob(fresh(entry), key: key, deadline: deadline, result: result)
                case .passthrough:
                    clock = .now
                    let stored = try await cpu.run { [store] () throws -> StoredFile in
                        try store.adopt(temporary, format: sniff.format, sha256: sourceHash, deadline: deadline)
                    }
                    timings.store += clock.millisecondsElapsed
                    return try await finishJob(fresh(CacheEntry(status: .passthrough, attachment: stored, thumbnail: small, sourceMIME: sniff.format.mime,
                                                          sourceBytes: bytes, pipeline: PushMediaVersion.pipeline)), key: key, deadline: deadline, result: result)
                }
            }
            if case let .reject(reason, message) = policy.decide(sniff, bytes: bytes) { throw Failure(reason: reason, message: message) }

            clock = .now
            let transcoder = transcoders[profile.id] ?? Transcoder(config: config, profile: profile)
            var decodable = temporary
            if sniff.format == .bmp {
                decodable = temporary + ".tiff"
                try await cpu.run { [decodable] in try transcoder.convertBMP(path: temporary, to: decodable) }
            }
            defer { if decodable != temporary { unlink(decodable) } }
            let image = decodable
            let header = try await cpu.run { () throws -> ImageHeader in
                try transcoder.header(path: image)
            }
            let decision = policy.decide(sniff, bytes: bytes, header: header, longEdge: transcoder.longEdge,
                                         keepsAnimation: transcoder.keepsAnimation(header))
            if case let .reject(reason, message) = decision { throw Failure(reason: reason, message: message) }
            let passthrough = decision == .passthrough
            let wantsThumbnail = transcoder.thumbnailEdge > 0
            /// What was overlooked to deliver the image, for the outcome's warnings.
            var notes: [String] = []
            if header.unusableProfile {
                notes.append("its embedded ICC colour profile is unusable (corrupt, or for another colour space): ignored, the colours are taken as sRGB as browsers do")
            }
            func noted(_ entry: CacheEntry) -> CacheEntry {
                var entry = entry
                if !notes.isEmpty { entry.message = notes.joined(separator: "; ") }
                return entry
            }
            // Wait until this decode's memory fits beside the others running.
            guard let held = await decodeBudget.reserve(transcoder.decodeMemory(header), until: deadline) else {
                return result(.budgetExceeded)
            }
            defer { decodeBudget.release(held) }

            /// Stores the thumbnail as soon as it exists: it is the best attempt should the budget run out.
            func storeThumbnail(_ small: EncodedImage) async throws -> StoredFile {
                let started = ContinuousClock.now
                let stored = try await cpu.run { [store] () throws -> StoredFile in
                    try store.put(small.bytes, format: .jpeg, width: small.width, height: small.height, deadline: deadline)
                }
                timings.store += started.millisecondsElapsed
                progress.withLock { $0.thumbnail = stored }
                return stored
            }

            // A passthrough source is decoded once, small: that proves it whole (a truncated file
            // fails here) and gives its thumbnail.
            var thumbnail: StoredFile?
            if passthrough {
                let small = try await cpu.run { () throws -> EncodedImage in try transcoder.thumbnail(path: image, header: header) }
                timings.transcode += clock.millisecondsElapsed
                if wantsThumbnail { thumbnail = try await storeThumbnail(small) }
                if ContinuousClock.now >= deadline { return result(.budgetExceeded) }
            }

            let upright = header.uprightSize
            clock = .now
            if passthrough {
                let extras = try await cpu.run { () throws -> ImageExtras in
                    guard self.needsExtras(frames: header.frames, transcoder: transcoder) else { return ImageExtras() }
                    let data = FileManager.default.contents(atPath: temporary).map { [UInt8]($0) } ?? []
                    return try self.extras(of: data, frames: header.frames, transcoder: transcoder)
                }
                let stored = try await cpu.run { [store] () throws -> StoredFile in
                    try store.adopt(temporary, format: sniff.format, width: upright.width, height: upright.height, sha256: sourceHash,
                                    deadline: deadline)
                }
                timings.store += clock.millisecondsElapsed
                return try await finishJob(fresh(noted(CacheEntry(status: .passthrough, attachment: stored, thumbnail: thumbnail, sourceMIME: sniff.format.mime,
                                                      sourceBytes: bytes, pipeline: PushMediaVersion.pipeline, icon: extras.icon,
                                                      clip: extras.clip, frame: extras.frame))), key: key, deadline: deadline, result: result)
            }
            let encoded: EncodedImage
            let small: EncodedImage?
            if transcoder.keepsAnimation(header) {
                // An animation's attachment decodes every frame; the thumbnail is its first frame.
                encoded = try await cpu.run { () throws -> EncodedImage in try transcoder.attachment(path: image, header: header) }
                if let note = encoded.note { notes.append(note) }
                small = wantsThumbnail ? try await cpu.run { () throws -> EncodedImage in try transcoder.thumbnail(encoded: encoded.bytes) } : nil
            } else {
                // A still image is decoded once: the thumbnail (stored first, as the best attempt)
                // and the attachment are both encoded from the same pixels in memory.
                let decoded = try await cpu.run { () throws -> DecodedImage in try transcoder.decode(path: image, header: header) }
                if wantsThumbnail {
                    let thumb = try await cpu.run { () throws -> EncodedImage in try transcoder.thumbnail(of: decoded) }
                    timings.transcode += clock.millisecondsElapsed
                    thumbnail = try await storeThumbnail(thumb)
                    if ContinuousClock.now >= deadline { return result(.budgetExceeded) }
                    clock = .now
                }
                encoded = try await cpu.run { () throws -> EncodedImage in try transcoder.attachment(of: decoded) }
                small = nil
            }
            let extras = try await cpu.run { () throws -> ImageExtras in
                try self.extras(of: encoded.bytes, frames: encoded.frames, transcoder: transcoder)
            }
            timings.transcode += clock.millisecondsElapsed
            clock = .now
            let (stored, smallStored) = try await cpu.run { [store] () throws -> (StoredFile, StoredFile?) in
                (try store.put(encoded.bytes, format: encoded.format, width: encoded.width, height: encoded.height, deadline: deadline),
                 try small.map { try store.put($0.bytes, format: .jpeg, width: $0.width, height: $0.height, deadline: deadline) })
            }
            timings.store += clock.millisecondsElapsed
            return try await finishJob(fresh(noted(CacheEntry(status: .processed, attachment: stored, thumbnail: thumbnail ?? smallStored,
                                                  sourceMIME: sniff.format.mime, sourceBytes: bytes, pipeline: PushMediaVersion.pipeline,
                                                  icon: extras.icon, clip: extras.clip, frame: extras.frame))),
                                       key: key, deadline: deadline, result: result)
        } catch let error as StoreError {
            return result(.storeUnavailable(Self.withoutWorkPaths(error.description, temporary)))
        } catch let error as FetchError where error.isLocalWrite {
            // The download could not be written to local disk: the store's fault, not the media's.
            return result(.storeUnavailable(Self.withoutWorkPaths(error.description, temporary)))
        } catch let error as ReasonedError {
            return result(.failed(reason: error.reason, message: Self.withoutWorkPaths(error.description, temporary)))
        } catch {
            return result(.failed(reason: "internal_error", message: Self.withoutWorkPaths("\(error)", temporary)))
        }
    }

    /// A video's poster frame through the image path: the profile's image (`full`) and the
    /// thumbnail (when the profile has thumbnails). Nil parts when not asked for.
    private func posterImage(_ video: String, info: VideoInfo, transcoder: Transcoder, full: Bool, time: Double?,
                             deadline: ContinuousClock.Instant) async throws -> (image: EncodedImage?, thumbnail: EncodedImage?) {
        let frames = VideoFrames(maxPixels: config.maxPixels)
        let frame = video + ".poster.png"
        defer { unlink(frame) }
        // FFmpeg works in a child process; these threads only wait for it.
        try await io.run { () throws in
            try frames.poster(video, info: info, time: time, longEdge: transcoder.longEdge, to: frame, deadline: deadline)
        }
        let header = try await cpu.run { () throws -> ImageHeader in try transcoder.header(path: frame) }
        guard let held = await decodeBudget.reserve(transcoder.decodeMemory(header), until: deadline) else { throw VideoError.deadlineExceeded }
        defer { decodeBudget.release(held) }
        return try await cpu.run { () throws -> (image: EncodedImage?, thumbnail: EncodedImage?) in
            let decoded = try transcoder.decode(path: frame, header: header)
            return (full ? try transcoder.attachment(of: decoded) : nil,
                    transcoder.thumbnailEdge > 0 ? try transcoder.thumbnail(of: decoded) : nil)
        }
    }

    /// A library's message without the store's work files in it (libvips names the file it read):
    /// the payload's label and URL already say which media it is.
    static func withoutWorkPaths(_ message: String, _ temporary: String) -> String {
        var text = message.replacingOccurrences(of: temporary + ".tiff", with: "the fetched file")
            .replacingOccurrences(of: temporary, with: "the fetched file")
        // The same file under another spelling of its path (libvips may normalise it).
        while let marker = text.range(of: "/.incoming/") {
            let start = text[..<marker.lowerBound].lastIndex(where: { $0 == " " || $0 == "\"" || $0 == "(" })
                .map { text.index(after: $0) } ?? text.startIndex
            let end = text[marker.upperBound...].firstIndex(where: { $0 == " " || $0 == ":" || $0 == "\"" || $0 == ")" }) ?? text.endIndex
            text.replaceSubrange(start..<end, with: "the fetched file")
        }
        return text
    }

    /// What is made beside an image attachment: the profile's icon (stored), the thumbnail's
    /// clipping rectangle for `--thumb-aspect`, and an animation's representative frame.
    struct ImageExtras: Sendable {
        var icon: StoredFile?
        var clip: ClipRect?
        var frame: Int?
    }

    private func needsExtras(frames: Int, transcoder: Transcoder) -> Bool {
        transcoder.profile.iconEdge != nil || (config.thumbnailAspect != nil && transcoder.profile.thumbnail)
            || (frames > 1 && transcoder.profile.animation)
    }

    /// Blocking: call on the CPU executor.
    private func extras(of attachment: [UInt8], frames: Int, transcoder: Transcoder) throws -> ImageExtras {
        var extras = ImageExtras()
        if let icon = try transcoder.icon(encoded: attachment) {
            extras.icon = try store.put(icon.bytes, format: icon.format, width: icon.width, height: icon.height)
        }
        if let aspect = config.thumbnailAspect, transcoder.profile.thumbnail {
            extras.clip = try transcoder.clipRect(encoded: attachment, aspect: aspect)
        }
        if frames > 1 && transcoder.profile.animation {
            // A passed-through animation with a frame that does not decode is still shown by
            // the phone up to that frame; it only goes without the frame hint.
            extras.frame = try? transcoder.representativeFrame(encoded: attachment)
        }
        return extras
    }

    private func finishJob(_ entry: CacheEntry, key: String, deadline: ContinuousClock.Instant,
                           result: (JobResult.Kind) -> JobResult) async throws -> JobResult {
        try await cpu.run { [store] in try store.record(entry, key: key, deadline: deadline) }
        return result(.ready(entry))
    }

    /// Records `previous` again with the lifetime the origin's answer gives it.
    private func renew(_ previous: CacheEntry, _ validators: OriginValidators, key: String, deadline: ContinuousClock.Instant,
                       result: (JobResult.Kind) -> JobResult) async throws -> JobResult {
        let entry = previous.renewed(validators, policy: config.freshness, now: Date())
        try await io.run { [store] in try store.record(entry, key: key, deadline: deadline) }
        return result(.renewed(entry))
    }
}
