// Fuzzing entry points, shared by the libFuzzer executables (`fuzz-payload`, `fuzz-media`,
// `fuzz-bmp`, `fuzz-video`, built by scripts/fuzz.sh) and by the regression tests that replay the
// committed corpus. One file per target: PayloadTarget, MediaTarget, BMPTarget, VideoTarget.
//
// Invariants are checked with `precondition`, so that a violation is a crash libFuzzer reports
// (and saves a reproducer for), not a silent wrong answer.

import Foundation
import PushMedia
import Synchronization

/// The fuzz targets: each takes arbitrary bytes and checks the invariants of what it runs.
public enum FuzzTargets {
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
