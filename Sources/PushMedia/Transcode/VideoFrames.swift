import CPushMediaShim
import Foundation

/// What `ffprobe` reads from a video's container.
public struct VideoInfo: Sendable, Equatable {
    /// The demuxer's names, e.g. `mov,mp4,m4a,3gp,3g2,mj2` or `matroska,webm`.
    public var container: String
    /// Seconds, when the container says.
    public var duration: Double?
    public var width: Int
    public var height: Int
    public var videoCodec: String
    public var audioCodec: String?
}

/// Why a video's frames could not be read.
public enum VideoError: Error, Sendable, Equatable, CustomStringConvertible, ReasonedError {
    /// `ffmpeg`/`ffprobe` are not installed.
    case toolMissing(String)
    /// The file is no video FFmpeg may read (not an allowed container, or no video stream).
    case unreadable(String)
    /// Its frames are larger than the pixel cap.
    case tooManyPixels(width: Int, height: Int, limit: Int64)
    /// The deadline came first; the child process was killed.
    case deadlineExceeded

    public var reason: String {
        switch self {
        case .toolMissing: "video_tools_missing"
        case .unreadable: "decode_failed"
        case .tooManyPixels: "too_many_pixels"
        case .deadlineExceeded: ReasonCode.budgetExceeded
        }
    }

    public var description: String {
        switch self {
        case let .toolMissing(tool): "\(tool) is not installed (Debian: apt-get install ffmpeg)"
        case let .unreadable(why): "the video cannot be read: \(why)"
        case let .tooManyPixels(width, height, limit): "\(width)×\(height) video frames exceed the \(limit)-pixel cap"
        case .deadlineExceeded: "the budget ran out while reading the video"
        }
    }
}

/// Frames of videos, with FFmpeg's programs run as supervised child processes (not its
/// libraries in this process): a hostile file that crashes a demuxer or decoder takes down a
/// child, not the service; a child is killed (its whole process group) at the deadline; its
/// address space is capped (`memoryLimit`, through util-linux's `prlimit`) and it dumps no core.
/// FFmpeg reads only the local file (`file` protocol only, no network), only through the
/// demuxers and decoders listed here, on one thread.
/// Every method blocks: call from a `BlockingExecutor`.
public struct VideoFrames: Sendable {
    public static let ffmpeg = "/usr/bin/ffmpeg"
    public static let ffprobe = "/usr/bin/ffprobe"
    /// Sets a child's address-space and core-size limits before it runs the tool.
    static let prlimit = "/usr/bin/prlimit"
    /// Demuxers FFmpeg may use (its names; `mov` covers MP4/M4A/3GP).
    public static let allowedDemuxers = [
        "mov", "matroska", "webm", "avi", "mpegts", "mpeg", "ogg", "flac", "aac", "mp3", "wav", "aiff",
    ]
    /// Decoders FFmpeg may use: video, then audio.
    public static let allowedDecoders = [
        "h264", "hevc", "vp8", "vp9", "av1", "libdav1d", "mpeg4", "mpeg1video", "mpeg2video",
        "mjpeg", "theora", "msmpeg4v3", "h263", "prores",
        "aac", "mp3", "mp3float", "mp2", "opus", "libopus", "vorbis", "flac", "alac", "ac3",
        "pcm_s16le", "pcm_s16be", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_u8",
    ]

    /// Frames whose `deviation(ofImage:)` is below this are blank.
    public static let blankDeviation = 8.0

    /// Largest frame (pixels) read.
    public var maxPixels: Int64
    /// Address-space cap of each FFmpeg child (bytes).
    public var memoryLimit: Int64 = 1 << 30

    public init(maxPixels: Int64) {
        self.maxPixels = maxPixels
    }

    /// Whether FFmpeg's programs are installed.
    public static var available: Bool {
        FileManager.default.isExecutableFile(atPath: ffmpeg) && FileManager.default.isExecutableFile(atPath: ffprobe)
    }

    static var inputOptions: [String] {
        [
            "-protocol_whitelist", "file", "-format_whitelist", allowedDemuxers.joined(separator: ","),
            "-codec_whitelist", allowedDecoders.joined(separator: ","),
        ]
    }

    /// The container, duration, size and codecs of the video at `path` (`audioOnly`: of an audio
    /// file, whose frame size is 0).
    public func probe(_ path: String, audioOnly: Bool = false, deadline: ContinuousClock.Instant) throws(VideoError)
        -> VideoInfo
    {
        let result = try Self.run(
            Self.ffprobe,
            ["-v", "error"] + Self.inputOptions
                + [
                    "-show_entries", "format=format_name,duration:stream=codec_type,codec_name,width,height",
                    "-of", "json", "file:" + path,
                ], deadline: deadline, memoryLimit: memoryLimit)
        guard result.status == 0 else {
            throw .unreadable(Self.firstLine(result.stderr) ?? "ffprobe exited with \(result.status)")
        }
        return try Self.info(probeOutput: result.stdout, audioOnly: audioOnly, maxPixels: maxPixels)
    }

    /// Reads ffprobe's JSON answer (`-show_entries format=format_name,duration:stream=codec_type,
    /// codec_name,width,height -of json`), which repeats what the file claims: untrusted.
    public static func info(probeOutput: [UInt8], audioOnly: Bool, maxPixels: Int64) throws(VideoError) -> VideoInfo {
        guard let object = try? JSONValue.parse(probeOutput).objectValue else {
            throw .unreadable("ffprobe gave no JSON answer")
        }
        let streams = object["streams"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let format = object["format"]?.objectValue
        let container = format?["format_name"]?.stringValue ?? ""
        let duration = format?["duration"]?.stringValue.flatMap(Double.init).flatMap {
            $0.isFinite && $0 >= 0 ? $0 : nil
        }
        let audio = streams.first(where: { $0["codec_type"]?.stringValue == "audio" })?["codec_name"]?.stringValue
        if audioOnly {
            guard let audio else { throw .unreadable("no audio stream") }
            return VideoInfo(
                container: container, duration: duration, width: 0, height: 0, videoCodec: "", audioCodec: audio)
        }
        guard let video = streams.first(where: { $0["codec_type"]?.stringValue == "video" }),
            let codec = video["codec_name"]?.stringValue,
            let width = video["width"]?.intValue, let height = video["height"]?.intValue, width > 0, height > 0
        else {
            throw .unreadable("no video stream")
        }
        guard width.multipliedReportingOverflow(by: height).overflow == false, Int64(width) * Int64(height) <= maxPixels
        else {
            throw .tooManyPixels(width: width, height: height, limit: maxPixels)
        }
        return VideoInfo(
            container: container, duration: duration, width: width, height: height, videoCodec: codec, audioCodec: audio
        )
    }

    /// Writes one frame as PNG to `output`, at most `longEdge` pixels on its long side: the one
    /// at `time` seconds when given; otherwise the first of a few candidates (a tenth of the
    /// way in, a third, half) that is not blank (black or one colour, as fades and title cards
    /// start), or the busiest of them. Returns the time of the frame.
    @discardableResult
    public func poster(
        _ path: String, info: VideoInfo, time: Double? = nil, longEdge: Int, to output: String,
        deadline: ContinuousClock.Instant
    ) throws(VideoError) -> Double {
        let duration = info.duration ?? 0
        // A given time past the end means the last frames.
        let candidates: [Double] =
            time.map { [duration > 0 ? min(max(0, $0), max(0, duration - 0.1)) : max(0, $0)] }
            ?? (duration > 0 ? [min(1, duration / 10), duration / 3, duration / 2] : [0, 1, 3])
        var best: (time: Double, deviation: Double)?
        for (index, candidate) in candidates.enumerated() {
            let file = index == 0 ? output : output + ".\(index).png"
            defer { if file != output { unlink(file) } }
            guard try frame(path, at: candidate, longEdge: longEdge, to: file, deadline: deadline) else { continue }
            guard let deviation = Self.deviation(ofImage: file) else { continue }
            if file != output, deviation > (best?.deviation ?? -1) { _ = rename(file, output) }
            if deviation > (best?.deviation ?? -1) { best = (candidate, deviation) }
            if deviation >= Self.blankDeviation || time != nil { break }
        }
        guard let best else { throw .unreadable("no frame could be decoded") }
        return best.time
    }

    /// One frame at `time` (or the last one before it, for a time past the end) as PNG.
    private func frame(
        _ path: String, at time: Double, longEdge: Int, to output: String,
        deadline: ContinuousClock.Instant
    ) throws(VideoError) -> Bool {
        let scale = "scale=w='min(iw,\(longEdge))':h='min(ih,\(longEdge))':force_original_aspect_ratio=decrease"
        let arguments =
            ["-nostdin", "-hide_banner", "-loglevel", "error", "-threads", "1"] + Self.inputOptions
            + [
                "-ss", String(format: "%.3f", time), "-i", "file:" + path, "-map", "0:v:0", "-an", "-sn", "-dn",
                "-frames:v", "1", "-vf", scale, "-c:v", "png", "-f", "image2", "-y", "file:" + output,
            ]
        let result = try Self.run(Self.ffmpeg, arguments, deadline: deadline, memoryLimit: memoryLimit)
        var info = stat()
        return result.status == 0 && stat(output, &info) == 0 && info.st_size > 0
    }

    /// How far the image at `path` is from blank: the largest standard deviation of a band
    /// (0 for black or one colour; photos and video frames are well above 8). Nil when it
    /// cannot be decoded.
    public static func deviation(ofImage path: String) -> Double? {
        var deviation = 0.0
        guard pm_vips_file_deviation(path, &deviation) == 0 else {
            _ = takeVipsError()
            return nil
        }
        return deviation
    }

    /// The first line of a child's error output.
    static func firstLine(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes.prefix(2000), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.split(separator: "\n").first.map(String.init)
    }

    /// Runs `tool` with `arguments` until it exits or `deadline` passes (then its process group
    /// is killed). Its output goes through temporary files, read at the end (at most 1 MB).
    static func run(
        _ tool: String, _ arguments: [String], deadline: ContinuousClock.Instant,
        memoryLimit: Int64
    ) throws(VideoError) -> (status: Int32, stdout: [UInt8], stderr: [UInt8]) {
        guard FileManager.default.isExecutableFile(atPath: tool) else {
            throw .toolMissing((tool as NSString).lastPathComponent)
        }
        let base = NSTemporaryDirectory() + "pushmedia-ffmpeg-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let outPath = base + ".out"
        let errPath = base + ".err"
        let out = open(outPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let err = open(errPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer {
            if out >= 0 { close(out) }
            if err >= 0 { close(err) }
            unlink(outPath)
            unlink(errPath)
        }
        guard out >= 0, err >= 0 else {
            throw .unreadable("cannot create a temporary file: \(String(cString: strerror(errno)))")
        }
        var pid: Int32 = 0
        // prlimit (util-linux) sets the limits and becomes the tool (same pid, same group).
        let limited = memoryLimit > 0 && FileManager.default.isExecutableFile(atPath: prlimit)
        let command = limited ? [prlimit, "--as=\(memoryLimit)", "--core=0", "--", tool] : [tool]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let started = argv.withUnsafeBufferPointer { pm_spawn(command[0], $0.baseAddress, out, err, &pid) }
        guard started == 0 else { throw .unreadable("cannot start \(tool): \(String(cString: strerror(started)))") }
        var status: Int32 = 0
        while true {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { break }
            if done < 0 && errno != EINTR { throw .unreadable("waitpid: \(String(cString: strerror(errno)))") }
            if ContinuousClock.now >= deadline {
                kill(-pid, SIGKILL)
                kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                throw .deadlineExceeded
            }
            usleep(2_000)
        }
        func contents(_ fd: Int32) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: 1 << 20)
            let count = pread(fd, &bytes, bytes.count, 0)
            return Array(bytes.prefix(max(0, count)))
        }
        let exit: Int32 = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return (exit, contents(out), contents(err))
    }
}
