import Foundation

extension Pipeline {
    /// Decides for audio or video by type and size (the streams may change it: `probeStreams`).
    func decideMedia(_ job: inout JobContext) -> JobResult.Kind? {
        job.decision = job.profile.decide(job.sniff, bytes: job.bytes)
        job.hasFFmpeg = VideoFrames.available
        return nil
    }

    /// Reads a video's streams once (ffprobe, in a child process the fetch threads only wait
    /// for): for the codec check, the poster frame and the transcode. A container the platform
    /// takes can still hold a codec it cannot play (AV1 or VP9 in MP4): the streams decide.
    func probeStreams(_ job: inout JobContext) async -> JobResult.Kind? {
        let sniff: SniffResult = job.sniff
        let frames = VideoFrames(maxPixels: config.maxPixels)
        let temporary = job.temporary
        let deadline = job.deadline
        let probed = await io.run {
            Result { () throws(VideoError) -> VideoInfo in try frames.probe(temporary, deadline: deadline) }
        }
        if job.decision == .passthrough, case let .success(info) = probed,
            !AVTranscoder.playableVideoCodecs.contains(info.videoCodec)
        {
            job.decision = .transcode(
                why: "\(info.videoCodec) video (in \(sniff.format.mime)) is not a codec "
                    + "\(job.profile.source) attachments play")
        }
        job.probed = probed
        return nil
    }

    /// A video gets a poster frame: its thumbnail when it passes through or is transcoded, the
    /// image that goes out when it cannot be played.
    func makePoster(_ job: inout JobContext) async -> JobResult.Kind? {
        guard case let .success(info)? = job.probed else { return nil }
        job.clock = .now
        let poster = try? await posterImage(
            job.temporary, info: info, transcoder: job.transcoder,
            full: job.decision != .passthrough, time: job.posterTime,
            deadline: job.deadline)
        job.count(\.transcode)
        job.made.poster = poster?.image
        job.made.thumbnail = poster?.thumbnail
        return nil
    }

    /// The attachment when no new work is needed: the source itself, or (when it cannot be used)
    /// the poster frame. A transcode is the next step's.
    func chooseAudioVideo(_ job: inout JobContext) throws -> JobResult.Kind? {
        switch job.decision {
        case let .reject(reason, message):
            guard let poster = job.stored.poster else { throw Failure(reason: reason, message: message) }
            job.deliverPoster(poster, why: message)
        case .passthrough:
            job.made.attachment = .file(
                MadeFiles.WorkFile(
                    path: job.temporary, format: job.sniff.format,
                    sha256: job.sourceHash))
            job.status = .passthrough
        case .transcode:
            break
        }
        return nil
    }

    /// Transcodes to MP4 (H.264, AAC) or M4A within the profile's cap; should that fail, the
    /// poster frame goes out instead when there is one.
    func transcodeAudioVideo(_ job: inout JobContext) async throws -> JobResult.Kind? {
        guard case let .transcode(why) = job.decision else { return nil }
        guard job.hasFFmpeg else {
            throw Failure(
                reason: ReasonCode.unsupportedType,
                message: "\(why), and FFmpeg (ffmpeg, ffprobe) is not installed to transcode it")
        }
        let kind = job.sniff.format.kind
        let output =
            job.temporary + (kind == .video ? ".out.mp4" : ".out." + Self.audioOutput(job.profile).fileExtension)
        job.workFiles.append(output)
        let cap = job.profile.maxBytes(for: kind)
        job.clock = .now
        let made: AVTranscoder.Output
        let format: MediaFormat
        do {
            (made, format) = try await runFFmpeg(job, to: output, maxBytes: cap)
        } catch let error as VideoError {
            job.count(\.transcode)
            if error == .deadlineExceeded { return .budgetExceeded }
            if let poster = job.stored.poster {
                job.deliverPoster(poster, why: "\(why), and transcoding failed (\(error))")
                return nil
            }
            throw Failure(reason: error.reason, message: "\(why); transcoding failed: \(error)")
        }
        job.count(\.transcode)
        job.made.attachment = .file(MadeFiles.WorkFile(path: output, format: format))
        if made.trimmed { job.notes.append("cut to its first \(Int(made.seconds)) s to fit \(cap) bytes") }
        return nil
    }

    /// FFmpeg's transcode of the job's source to `output`, and its format: MP4, or M4A for audio
    /// (a WebM or Matroska of sound only included).
    private func runFFmpeg(
        _ job: JobContext, to output: String,
        maxBytes cap: Int64
    ) async throws -> (AVTranscoder.Output, MediaFormat) {
        let av = AVTranscoder(config: config)
        let frames = VideoFrames(maxPixels: config.maxPixels)
        let temporary = job.temporary
        let deadline = job.deadline
        guard job.sniff.format.kind == .video else {
            let format = Self.audioOutput(job.profile)
            let made = try await io.run { () throws -> AVTranscoder.Output in
                try av.audio(
                    temporary, info: try frames.probe(temporary, audioOnly: true, deadline: deadline),
                    maxBytes: cap, to: output, as: format, deadline: deadline)
            }
            return (made, format)
        }
        let audioCap = job.profile.maxAudioBytes
        let video = job.probed ?? .failure(.unreadable("not probed"))
        return try await io.run { () throws -> (AVTranscoder.Output, MediaFormat) in
            do {
                let info = try video.get()
                return (try av.video(temporary, info: info, maxBytes: cap, to: output, deadline: deadline), .mp4)
            } catch VideoError.unreadable("no video stream") where audioCap > 0 {
                // A WebM (or Matroska) of sound only: audio, then.
                let info = try frames.probe(temporary, audioOnly: true, deadline: deadline)
                return (try av.audio(temporary, info: info, maxBytes: audioCap, to: output, deadline: deadline), .m4a)
            }
        }
    }

    /// What audio is transcoded into: M4A, or MP3 for a media URL that asks for one.
    static func audioOutput(_ profile: PlatformProfile) -> MediaFormat {
        profile.delivers == .mp3 ? .mp3 : .m4a
    }

    /// A video's poster frame through the image path: the profile's image (`full`) and the
    /// thumbnail (when the profile has thumbnails). Nil parts when not asked for.
    private func posterImage(
        _ video: String, info: VideoInfo, transcoder: Transcoder, full: Bool, time: Double?,
        deadline: ContinuousClock.Instant
    ) async throws
        -> (image: EncodedImage?, thumbnail: EncodedImage?)
    {
        let frames = VideoFrames(maxPixels: config.maxPixels)
        let frame = video + ".poster.png"
        defer { unlink(frame) }
        // FFmpeg works in a child process; these threads only wait for it.
        _ = try await io.run { () throws in
            try frames.poster(
                video, info: info, time: time, longEdge: transcoder.longEdge, to: frame,
                deadline: deadline)
        }
        let header = try await cpu.run { () throws -> ImageHeader in try transcoder.header(path: frame) }
        guard let held = await decodeBudget.reserve(transcoder.decodeMemory(header), until: deadline) else {
            throw VideoError.deadlineExceeded
        }
        defer { decodeBudget.release(held) }
        return try await cpu.run { () throws -> (image: EncodedImage?, thumbnail: EncodedImage?) in
            let decoded = try transcoder.decode(path: frame, header: header)
            return (
                full ? try transcoder.attachment(of: decoded) : nil,
                transcoder.thumbnailEdge > 0 ? try transcoder.thumbnail(of: decoded) : nil
            )
        }
    }
}
