import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// Video poster frames with the real FFmpeg programs, on clips FFmpeg makes here.
@Suite("Video poster frames")
struct VideoTests {
    let origin: TestOrigin
    let store = TemporaryDirectory()
    let work = TemporaryDirectory()

    init() throws {
        origin = try TestOrigin()
    }

    /// A clip made by `ffmpeg` from lavfi sources (`input` is the -i argument of -f lavfi).
    func clip(_ name: String, _ input: String, _ output: [String]) throws -> [UInt8] {
        let path = work.file(name)
        let result = try VideoFrames.run(
            VideoFrames.ffmpeg,
            ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", input] + output + ["-y", path],
            deadline: .now + .seconds(60), memoryLimit: 0)
        #expect(result.status == 0, "\(String(decoding: result.stderr, as: UTF8.self))")
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static let h264 = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]

    func process(
        _ body: [UInt8], as path: String, budget: Duration = .seconds(20),
        _ adjust: (inout PushMediaConfig) -> Void = { _ in }
    ) async throws -> (PipelineResult, Duration) {
        origin.route(path, .file(body: body, contentType: "video/mp4"))
        var config = testConfig(store: store, budget: budget)
        adjust(&config)
        let pipeline = try Pipeline(config: config)
        let started = ContinuousClock.now
        let result = await pipeline.process(
            JSONObject([
                ("aps", .object(JSONObject([("alert", .string("New episode")), ("mutable-content", .number("1"))]))),
                ("media_url", .string(origin.url(path))),
            ]))
        return (result, ContinuousClock.now - started)
    }

    func stored(_ url: String?) throws -> String {
        store.file(try #require(url?.split(separator: "/").last.map(String.init)))
    }

    @Test func aClipThatStartsBlackGetsALaterFrame() async throws {
        // 2 s of black, then 4 s of a test pattern: the poster is not the black opening.
        let body = try clip(
            "black-start.mp4",
            "color=c=black:s=320x240:d=2:r=10[b];testsrc=s=320x240:d=4:r=10[t];[b][t]concat=n=2:v=1:a=0",
            Self.h264)
        let (result, _) = try await process(body, as: "/black-start.mp4")
        #expect(result.outcome.status == .passthrough)
        let thumbnail = try #require(result.outcome.thumbnail)
        let deviation = try #require(VideoFrames.deviation(ofImage: try stored(thumbnail.url)))
        #expect(deviation >= VideoFrames.blankDeviation, "the poster is blank (deviation \(deviation))")
        #expect(leftovers(store).isEmpty)
    }

    @Test func airshipsTimePicksThePosterFrame() async throws {
        let body = try clip(
            "black-then.mp4",
            "color=c=black:s=320x240:d=2:r=10[b];testsrc=s=320x240:d=4:r=10[t];[b][t]concat=n=2:v=1:a=0",
            Self.h264)
        origin.route("/airship.mp4", .file(body: body, contentType: "video/mp4"))
        let pipeline = try Pipeline(config: testConfig(store: store))
        func poster(time: Double?) async throws -> Double {
            var options = JSONObject()
            if let time { options["time"] = .number(String(time)) }
            let attachment = JSONObject([
                ("url", .array([.string(origin.url("/airship.mp4"))])), ("options", .object(options)),
            ])
            let result = await pipeline.process(
                JSONObject([
                    ("aps", .object(JSONObject([("alert", .string("Clip")), ("mutable-content", .number("1"))]))),
                    ("com.urbanairship.media_attachment", .object(attachment)),
                ]))
            #expect(result.outcome.status == .passthrough, "\(result.outcome.message ?? "")")
            return try #require(VideoFrames.deviation(ofImage: try stored(result.outcome.thumbnail?.url)))
        }
        // At 0.5 s the clip is black: the given time is honoured even so; without one, a later frame.
        #expect(try await poster(time: 0.5) < VideoFrames.blankDeviation)
        #expect(try await poster(time: 3) >= VideoFrames.blankDeviation)
        #expect(try await poster(time: nil) >= VideoFrames.blankDeviation)
    }

    @Test func androidGetsThePosterAsItsImage() async throws {
        let body = try clip("wide.mp4", "testsrc=s=640x480:d=2:r=10", Self.h264)
        let (result, _) = try await process(body, as: "/android.mp4") { $0.profile = .android }
        let outcome = result.outcome
        #expect(outcome.status == .processed, "\(outcome.message ?? "")")
        let attachment = try #require(outcome.attachment)
        // Android's 2:1 shape, cut from the 4:3 frame.
        #expect(attachment.mime == "image/jpeg" && attachment.width == 640 && attachment.height == 320)
        #expect(try Transcoder(config: PushMediaConfig()).header(path: try stored(attachment.url)).width == 640)
        #expect(outcome.sourceMIME == "video/mp4")
    }

    @Test func aMatroskaClipWithOpusIsTranscodedForIOS() async throws {
        let body = try clip(
            "clip.mkv", "testsrc=s=1920x1080:d=2:r=10[out0];sine=d=2[out1]",
            [
                "-map", "0:v", "-map", "0:a", "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-c:a",
                "libopus", "-f", "matroska",
            ])
        let (result, _) = try await process(body, as: "/clip.mkv")
        #expect(result.outcome.status == .processed, "\(result.outcome.message ?? "")")
        #expect(result.outcome.sourceMIME == "video/x-matroska")
        let attachment = try #require(result.outcome.attachment)
        #expect(attachment.mime == "video/mp4")
        let info = try VideoFrames(maxPixels: 50_000_000).probe(
            try stored(attachment.url), deadline: .now + .seconds(10))
        // Long edge down to the default 1280.
        #expect(info.videoCodec == "h264" && info.audioCodec == "aac" && info.width == 1280 && info.height == 720)
    }

    @Test func theBudgetEndingDuringATranscodeSendsThePoster() async throws {
        // Two minutes of 720p (10 s encoded, then repeated eleven times without encoding again):
        // its poster takes under a second, its transcode tens of seconds, so the budget ends
        // during the transcode with the poster ready, on a loaded machine as on a fast one.
        _ = try clip(
            "long.webm", "testsrc=s=1280x720:d=10:r=25",
            ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "16", "-b:v", "300k"])
        let looped = work.file("looped.webm")
        let repeated = try VideoFrames.run(
            VideoFrames.ffmpeg,
            [
                "-nostdin", "-loglevel", "error", "-stream_loop", "11", "-i", work.file("long.webm"), "-c", "copy",
                "-f", "webm", "-y", looped,
            ],
            deadline: .now + .seconds(60), memoryLimit: 0)
        #expect(repeated.status == 0, "\(String(decoding: repeated.stderr, as: UTF8.self))")
        let body = Array(try Data(contentsOf: URL(fileURLWithPath: looped)))
        let budget: Duration = underSanitizer ? .seconds(8) : .seconds(5)
        let (result, elapsed) = try await process(body, as: "/long.webm", budget: budget)
        #expect(result.outcome.status == .bestAttempt && result.outcome.reason == "budget_exceeded")
        #expect(result.outcome.attachment?.mime == "image/jpeg", "the poster is the attachment")
        #expect(elapsed < budget + lateness, "took \(elapsed)")
    }

    @Test(arguments: [
        ("flac", ["-c:a", "flac"]), ("ogg", ["-c:a", "libopus"]), ("vorbis.ogg", ["-c:a", "libvorbis"]),
        ("aac", ["-c:a", "aac", "-f", "adts"]),
    ])
    func audioIOSCannotPlayIsTranscodedToM4A(_ name: String, _ codec: [String]) async throws {
        let body = try clip("tone." + name, "sine=f=440:d=3", codec)
        let (result, _) = try await process(body, as: "/tone-" + name)
        #expect(result.outcome.status == .processed, "\(name): \(result.outcome.message ?? "")")
        let attachment = try #require(result.outcome.attachment)
        #expect(attachment.mime == "audio/mp4" && attachment.url.hasSuffix(".m4a"))
        let info = try VideoFrames(maxPixels: 1).probe(
            try stored(attachment.url), audioOnly: true, deadline: .now + .seconds(10))
        #expect(info.audioCodec == "aac" && abs((info.duration ?? 0) - 3) < 0.3)
    }

    @Test(arguments: [
        ("ts", ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-f", "mpegts"], "video/mp2t"),
        ("av1.mp4", ["-c:v", "libaom-av1", "-cpu-used", "8", "-b:v", "200k", "-f", "mp4"], "video/mp4"),
        ("mov", ["-c:v", "mjpeg", "-f", "mov"], "video/quicktime"),
    ])
    func otherContainersAndCodecsAreTranscodedForIOS(_ name: String, _ codec: [String], _ sniffed: String) async throws
    {
        let body = try clip("other." + name, "testsrc=s=320x240:d=1:r=10", codec)
        let (result, _) = try await process(body, as: "/other." + name)
        #expect(result.outcome.sourceMIME == sniffed)
        #expect(result.outcome.status == .processed, "\(name): \(result.outcome.message ?? "")")
        let attachment = try #require(result.outcome.attachment)
        #expect(attachment.mime == "video/mp4")
        let info = try VideoFrames(maxPixels: 50_000_000).probe(
            try stored(attachment.url), deadline: .now + .seconds(10))
        #expect(info.videoCodec == "h264" && info.width == 320 && info.height == 240)
    }

    @Test func aWebMOfSoundOnlyBecomesM4AForIOS() async throws {
        let body = try clip("sound.webm", "sine=f=330:d=2", ["-c:a", "libopus", "-f", "webm"])
        let (result, _) = try await process(body, as: "/sound.webm")
        #expect(result.outcome.status == .processed, "\(result.outcome.message ?? "")")
        #expect(result.outcome.sourceMIME == "video/webm")
        #expect(
            result.outcome.attachment?.mime == "audio/mp4" && result.outcome.attachment?.url.hasSuffix(".m4a") == true)
    }

    @Test func transcodePlans() {
        // Fits whole: the bitrate that fills the cap, at most the maximum.
        let short = AVTranscoder.plan(
            duration: 10, maxBytes: 50_000_000, minimumRate: 400_000, maximumRate: 4_096_000, clipSeconds: 30)
        #expect(!short.trimmed && short.seconds == 10 && short.rate == 4_096_000)
        // Too long for the cap at the minimum rate: cut to the clip length.
        let long = AVTranscoder.plan(
            duration: 7200, maxBytes: 50_000_000, minimumRate: 400_000, maximumRate: 4_096_000, clipSeconds: 30)
        #expect(long.trimmed && long.seconds == 30 && long.rate * long.seconds <= 50_000_000 * 8)
    }

    @Test func brokenAndDisguisedVideosEndInADefinedStatusWithinTheBudget() async throws {
        let whole = try clip("whole.mp4", "testsrc=s=320x240:d=4:r=10", Self.h264)
        let zip: [UInt8] =
            [0x50, 0x4B, 0x03, 0x04] + [UInt8](repeating: 0, count: 26) + Array("mimetypeapplication/zip".utf8)
        let html = Array("<!DOCTYPE html><html><body>not a video</body></html>".utf8)
        for (name, body) in [
            ("truncated.mp4", Array(whole.prefix(whole.count / 3))), ("zip.mp4", zip), ("page.mp4", html),
        ] {
            let (result, elapsed) = try await process(body, as: "/" + name, budget: .seconds(5))
            #expect(
                [.rejected, .passthrough, .bestAttempt].contains(result.outcome.status),
                "\(name): \(result.outcome.status)")
            #expect(elapsed < .seconds(5) + lateness, "\(name) took \(elapsed)")
            #expect(result.payload["aps"]?.objectValue?["alert"] == .string("New episode"))
            if name != "truncated.mp4" { #expect(result.outcome.reason == "unsupported_type", "\(name)") }
        }
        #expect(leftovers(store).isEmpty)
        #expect(nonFinalStoreFiles(store).isEmpty)
    }

    @Test func an8KClipEndsInADefinedStatusWithinItsBudget() async throws {
        // 7680×4320 (33 MP, under the 50 MP cap): probed, posted and transcoded down to 1280 px, or
        // cut off by the budget with the poster; never a hang, never a partial file.
        let body = try clip("8k.mkv", "testsrc=s=7680x4320:d=2:r=5", Self.h264 + ["-f", "matroska"])
        let (result, elapsed) = try await process(body, as: "/8k.mkv", budget: .seconds(3))
        #expect(
            [.processed, .bestAttempt].contains(result.outcome.status),
            "\(result.outcome.status): \(result.outcome.message ?? "")")
        #expect(elapsed < .seconds(3) + lateness, "took \(elapsed)")
        if result.outcome.status == .processed {
            let info = try VideoFrames(maxPixels: 50_000_000).probe(
                try stored(result.outcome.attachment?.url), deadline: .now + .seconds(10))
            #expect(info.width == 1280 && info.height == 720)
        } else {
            // The poster when it was ready in time (on a slow machine, the original reference).
            #expect(result.outcome.reason == "budget_exceeded")
            #expect(
                result.outcome.attachment.map { $0.mime == "image/jpeg" }
                    ?? (result.payload["media_url"] == .string(origin.url("/8k.mkv"))))
        }
        #expect(nonFinalStoreFiles(store).isEmpty)
    }

    @Test func framesOverThePixelCapAreNotDecoded() async throws {
        let body = try clip("big.mkv", "testsrc=s=640x480:d=1:r=5", Self.h264 + ["-f", "matroska"])
        let frames = VideoFrames(maxPixels: 100_000)
        let path = work.file("big-in.mkv")
        try Data(body).write(to: URL(fileURLWithPath: path))
        #expect(throws: VideoError.self) { try frames.probe(path, deadline: .now + .seconds(10)) }
        // Through the pipeline: neither a poster nor a transcode.
        let (result, _) = try await process(body, as: "/big.mkv") { $0.maxPixels = 100_000 }
        #expect(result.outcome.status == .rejected && result.outcome.reason == "too_many_pixels")
    }

    @Test func theChildIsKilledAtTheDeadline() throws {
        let body = try clip("long.mp4", "testsrc=s=320x240:d=2:r=10", Self.h264)
        let path = work.file("long-in.mp4")
        try Data(body).write(to: URL(fileURLWithPath: path))
        let started = ContinuousClock.now
        #expect(throws: VideoError.self) {
            // ffmpeg reading a never-ending lavfi source: only the deadline stops it.
            _ = try VideoFrames.run(
                VideoFrames.ffmpeg, ["-nostdin", "-f", "lavfi", "-i", "testsrc=s=320x240:r=25", "-f", "null", "-"],
                deadline: .now + .milliseconds(300), memoryLimit: 0)
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        let info = try VideoFrames(maxPixels: 50_000_000).probe(path, deadline: .now + .seconds(10))
        #expect(info.width == 320 && info.height == 240 && info.videoCodec == "h264" && info.container.contains("mp4"))
        #expect(abs((info.duration ?? 0) - 2) < 0.2)
    }
}
