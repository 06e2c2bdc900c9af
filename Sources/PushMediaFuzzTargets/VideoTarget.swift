import Foundation
import PushMedia

// video: ffprobe's answer parsed, and the real ffprobe/ffmpeg children on small files.
extension FuzzTargets {
    /// Reads `data` as ffprobe's JSON answer (what a video file claims about itself), and checks
    /// what is accepted: frame size within the cap, a finite duration, a transcode plan within
    /// the cap. Small inputs also go, as a file, through the real ffprobe and poster extraction
    /// under a 3 s deadline: whatever the bytes, the child is supervised and the call returns.
    public static func video(_ data: [UInt8]) {
        let audioOnly = (data.last ?? 0) & 1 == 1
        do {
            let info = try VideoFrames.info(probeOutput: data, audioOnly: audioOnly, maxPixels: maxPixels)
            if !audioOnly {
                precondition(
                    info.width > 0 && info.height > 0 && Int64(info.width) * Int64(info.height) <= maxPixels,
                    "accepted \(info.width)×\(info.height)")
            }
            precondition(
                info.duration.map { $0.isFinite && $0 >= 0 } ?? true,
                "accepted duration \(String(describing: info.duration))")
            let plan = AVTranscoder.plan(
                duration: info.duration ?? 30, maxBytes: 50_000_000, minimumRate: 396_000, maximumRate: 4_096_000,
                clipSeconds: 30)
            precondition(
                plan.seconds > 0 && plan.rate > 0 && plan.seconds * plan.rate <= 50_000_000 * 8, "plan \(plan)")
        } catch {
            precondition(!error.description.isEmpty)
        }
        guard data.count <= 16 * 1024, VideoFrames.available else { return }
        let path = temporaryFile("video", contents: data)
        defer {
            unlink(path)
            unlink(path + ".png")
        }
        let frames = VideoFrames(maxPixels: 4_000_000)
        let started = ContinuousClock.now
        do {
            let info = try frames.probe(path, deadline: .now + .seconds(3))
            try frames.poster(path, info: info, longEdge: 128, to: path + ".png", deadline: .now + .seconds(3))
        } catch {
            precondition(!error.description.isEmpty)
        }
        precondition(ContinuousClock.now - started < .seconds(12), "the children outlived their deadlines")
    }

}
