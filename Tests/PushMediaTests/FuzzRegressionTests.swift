import Foundation
import PushMediaFuzzTargets
import PushMediaTestSupport
import Testing

/// Replays the committed fuzz seeds and crash reproducers (fuzz/corpus/TARGET and
/// fuzz/crashes/TARGET) through the fuzz targets, whose invariants are preconditions: a
/// regression crashes the test run. To find the failing file:
/// `swift build --product fuzz-payload && .build/debug/fuzz-payload -v fuzz/corpus/payload fuzz/crashes/payload`.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    /// The repository's fuzz/ directory, next to samples/.
    static let fuzzDirectory = URL(fileURLWithPath: samplesDirectory).deletingLastPathComponent()
        .appendingPathComponent("fuzz").path

    static func inputs(_ target: String) -> [String] {
        FuzzReplay.files(["corpus", "crashes"].map { "\(fuzzDirectory)/\($0)/\(target)" })
    }

    /// Each target's entry point, by its folder name under fuzz/corpus and fuzz/crashes.
    static let targets: [String: @Sendable ([UInt8]) -> Void] = [
        "payload": FuzzTargets.payload,  // parse, locate and rewrite
        "media": FuzzTargets.media,  // sniff, header probe and BMP decode
        "bmp": FuzzTargets.bmp,  // the BMP decoder, and the conversion of what it decodes
        "video": FuzzTargets.video,  // ffprobe's answer within its limits, children supervised
        "h2": FuzzTargets.h2,  // the relays' HTTP/2 sessions over a peer's bytes
    ]

    @Test(
        "seeds and reproducers keep their target's invariants", arguments: ["payload", "media", "bmp", "video", "h2"])
    func replay(_ target: String) throws {
        let run = try #require(Self.targets[target])
        let files = Self.inputs(target)
        #expect(files.count > 0, "no inputs under \(Self.fuzzDirectory)/corpus/\(target)")
        for file in files { run(FuzzReplay.read(file)) }
    }

    @Test("the replay helper finds files recursively, in order, skipping hidden ones")
    func replayFindsFiles() throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("sub"), withIntermediateDirectories: true)
        for name in ["b", "a", ".hidden", "sub/c"] {
            #expect(FileManager.default.createFile(atPath: directory.file(name), contents: Data(name.utf8)))
        }
        let found = FuzzReplay.files([directory.path, directory.file("a"), directory.file("missing")])
        #expect(found.map { String($0.dropFirst(directory.path.count)) } == ["/a", "/b", "/sub/c", "/a"])
        #expect(FuzzReplay.read(directory.file("sub/c")) == Array("sub/c".utf8))
        var replayed: [[UInt8]] = []
        var printed: [String] = []
        let count = FuzzReplay.main(
            name: "test", arguments: ["test", "-v", directory.file("b")], print: { printed.append($0) },
            target: { replayed.append($0) })
        #expect(count == 1 && replayed == [Array("b".utf8)])
        #expect(printed == [directory.file("b"), "test: replayed 1 input(s)"])
    }
}
