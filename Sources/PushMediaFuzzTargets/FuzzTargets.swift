// Fuzzing entry points, shared by the libFuzzer executable (`fuzz TARGET`, built by
// scripts/fuzz.sh) and by the regression tests that replay the committed corpus. One file per
// target: PayloadTarget, MediaTarget, BMPTarget, VideoTarget, H2Target.
//
// Invariants are checked with `precondition`, so that a violation is a crash libFuzzer reports
// (and saves a reproducer for), not a silent wrong answer.

import Foundation
import PushMedia
import Synchronization

/// The fuzz targets: each takes arbitrary bytes and checks the invariants of what it runs.
public enum FuzzTargets {
    /// Every target by its name (its folder under fuzz/corpus and fuzz/crashes).
    public static let named: KeyValuePairs<String, @Sendable ([UInt8]) -> Void> = [
        "payload": payload,  // parse, locate and rewrite
        "media": media,  // sniff, header probe and BMP decode
        "bmp": bmp,  // the BMP decoder, and the conversion of what it decodes
        "video": video,  // ffprobe's answer within its limits, children supervised
        "h2": h2,  // the relays' HTTP/2 sessions over a peer's bytes
    ]

    /// The target called `name`.
    public static func target(_ name: String) -> (@Sendable ([UInt8]) -> Void)? {
        named.first { $0.key == name }?.value
    }

    /// The pixel cap the pipeline uses (`PushMediaConfig().maxPixels`).
    static let maxPixels: Int64 = 50_000_000
    /// Images up to this many pixels (a frame) are decoded and encoded, not only probed.
    static let decodePixels: Int64 = 256 * 256
    static let transcoder = Transcoder(config: PushMediaConfig())
    static let counter = Atomic<Int>(0)
    /// One directory per process, removed at exit; one file per call, removed after the call.
    static let directory: String = {
        var temp = NSTemporaryDirectory()
        if !temp.hasSuffix("/") { temp += "/" }
        let path = temp + "pushmedia-fuzz-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: FuzzTargets.directory) }
        return path
    }()

    /// Writes `data` to a new file `PREFIX-N[SUFFIX]` in `directory`; the caller removes it.
    static func temporaryFile(_ prefix: String, suffix: String = "", contents data: [UInt8]) -> String {
        let n = counter.add(1, ordering: .relaxed).newValue
        let path = directory + "/\(prefix)-\(n)\(suffix)"
        guard FileManager.default.createFile(atPath: path, contents: Data(data)) else {
            preconditionFailure("cannot write \(path)")
        }
        return path
    }
}
