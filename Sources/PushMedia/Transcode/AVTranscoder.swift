import Foundation
import PushMediaFormats

/// Video and audio transcodes for platforms that play them, with the `ffmpeg` program under the
/// same supervision as `VideoFrames` (child process, deadline, memory cap, allow-lists):
/// - video → H.264/AAC MP4 with `faststart`, long edge ≤ `videoEdge`, bitrate chosen to fit `maxBytes`;
/// - audio → AAC in M4A, or MP3 when a media URL asks for one (128 kb/s stereo, loudness
///   untouched), within `maxBytes`.
/// A source that cannot fit whole at a watchable bitrate is cut to its first `clipSeconds`.
/// Blocking: call from a `BlockingExecutor`.
public struct AVTranscoder: Sendable {
    public var videoEdge: Int
    public var clipSeconds: Int
    public var memoryLimit: Int64 = 1 << 30
    /// Video codecs iOS plays in the containers it takes (MP4, MPEG, AVI); others are transcoded.
    public static let playableVideoCodecs: Set<String> = ["h264", "hevc", "mpeg4", "mpeg1video", "mpeg2video", "mjpeg"]
    /// Lowest video bitrate (bits/s) worth sending; below it the clip is cut instead.
    static let minimumVideoRate = 300_000.0
    static let maximumVideoRate = 4_000_000.0
    static let audioRate = 128_000.0
    static let videoAudioRate = 96_000.0

    public init(config: PushMediaConfig) {
        videoEdge = config.videoEdge
        clipSeconds = config.clipSeconds
    }

    /// What a transcode made.
    public struct Output: Sendable, Equatable {
        public var bytes: Int64
        /// Seconds kept (the whole source, or its first `clipSeconds`).
        public var seconds: Double
        public var trimmed: Bool
    }

    /// Seconds to keep and the total bitrate (bits/s) that fits `maxBytes` (8 % kept for the container).
    public static func plan(
        duration: Double, maxBytes: Int64, minimumRate: Double, maximumRate: Double, clipSeconds: Int
    ) -> (seconds: Double, rate: Double, trimmed: Bool) {
        let bits = Double(maxBytes) * 8 * 0.92
        let whole = max(duration, 0.1)
        if bits / whole >= minimumRate { return (whole, min(maximumRate, bits / whole), false) }
        let seconds = min(whole, Double(clipSeconds), bits / minimumRate)
        return (seconds, min(maximumRate, bits / seconds), true)
    }

    /// `source` (a video `info` describes) as an MP4 at `output` of at most `maxBytes`.
    public func video(
        _ source: String, info: VideoInfo, maxBytes: Int64, to output: String,
        deadline: ContinuousClock.Instant
    ) throws(VideoError) -> Output {
        let audio = info.audioCodec != nil ? Self.videoAudioRate : 0
        var plan = Self.plan(
            duration: info.duration ?? Double(clipSeconds), maxBytes: maxBytes,
            minimumRate: Self.minimumVideoRate + audio,
            maximumRate: Self.maximumVideoRate + audio, clipSeconds: clipSeconds)
        for _ in 0..<2 {
            let videoRate = Int(plan.rate - audio)
            let scale =
                "scale=w='min(iw,\(videoEdge))':h='min(ih,\(videoEdge))':force_original_aspect_ratio=decrease:force_divisible_by=2"
            var arguments =
                ["-nostdin", "-hide_banner", "-loglevel", "error", "-threads", "2"] + VideoFrames.inputOptions
                + [
                    "-i", "file:" + source, "-map", "0:v:0", "-map", "0:a:0?", "-t",
                    String(format: "%.3f", plan.seconds), "-sn", "-dn",
                    "-vf", scale, "-c:v", "libx264", "-preset", "veryfast", "-profile:v", "high", "-pix_fmt", "yuv420p",
                    "-b:v", "\(videoRate)", "-maxrate", "\(videoRate)", "-bufsize", "\(videoRate * 2)",
                ]
            if audio > 0 { arguments += ["-c:a", "aac", "-b:a", "\(Int(audio))", "-ac", "2"] }
            arguments += ["-movflags", "+faststart", "-map_metadata", "-1", "-f", "mp4", "-y", "file:" + output]
            let result = try VideoFrames.run(
                VideoFrames.ffmpeg, arguments, deadline: deadline, memoryLimit: memoryLimit)
            guard result.status == 0 else {
                throw .unreadable(VideoFrames.firstLine(result.stderr) ?? "ffmpeg exited with \(result.status)")
            }
            let bytes = Self.size(output)
            if bytes > 0 && bytes <= maxBytes {
                return Output(bytes: bytes, seconds: plan.seconds, trimmed: plan.trimmed)
            }
            plan.rate = max(audio + 100_000, plan.rate * 0.7)  // the encoder overshot: once more, lower
        }
        throw .unreadable("the transcoded video does not fit \(maxBytes) bytes")
    }

    /// The first audio stream of `source` as AAC in an M4A (or, `as: .mp3`, as an MP3) at `output`
    /// of at most `maxBytes`.
    public func audio(
        _ source: String, info: VideoInfo, maxBytes: Int64, to output: String, as format: MediaFormat = .m4a,
        deadline: ContinuousClock.Instant
    ) throws(VideoError) -> Output {
        let plan = Self.plan(
            duration: info.duration ?? Double(clipSeconds), maxBytes: maxBytes, minimumRate: Self.audioRate,
            maximumRate: Self.audioRate, clipSeconds: clipSeconds)
        let arguments =
            ["-nostdin", "-hide_banner", "-loglevel", "error", "-threads", "1"] + VideoFrames.inputOptions
            + [
                "-i", "file:" + source, "-map", "0:a:0", "-vn", "-sn", "-dn", "-t",
                String(format: "%.3f", plan.seconds),
                "-b:a", "\(Int(Self.audioRate))", "-ac", "2", "-map_metadata", "-1",
            ]
            + (format == .mp3
                ? ["-c:a", "libmp3lame", "-f", "mp3"] : ["-c:a", "aac", "-movflags", "+faststart", "-f", "ipod"])
            + ["-y", "file:" + output]
        let result = try VideoFrames.run(VideoFrames.ffmpeg, arguments, deadline: deadline, memoryLimit: memoryLimit)
        guard result.status == 0 else {
            throw .unreadable(VideoFrames.firstLine(result.stderr) ?? "ffmpeg exited with \(result.status)")
        }
        let bytes = Self.size(output)
        guard bytes > 0 && bytes <= maxBytes else {
            throw .unreadable("the transcoded audio does not fit \(maxBytes) bytes")
        }
        return Output(bytes: bytes, seconds: plan.seconds, trimmed: plan.trimmed)
    }

    static func size(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : 0
    }
}
