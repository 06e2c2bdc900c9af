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

    @Test("payload seeds and reproducers: parse, locate and rewrite keep their invariants")
    func payload() {
        let files = Self.inputs("payload")
        #expect(files.count > 0, "no inputs under \(Self.fuzzDirectory)/corpus/payload")
        for file in files { FuzzTargets.payload(FuzzReplay.read(file)) }
    }

    @Test("media seeds and reproducers: sniff, header probe and BMP decode keep their invariants")
    func media() {
        let files = Self.inputs("media")
        #expect(files.count > 0, "no inputs under \(Self.fuzzDirectory)/corpus/media")
        for file in files { FuzzTargets.media(FuzzReplay.read(file)) }
    }

    @Test("BMP seeds and reproducers: the decoder keeps its invariants, what it decodes converts")
    func bmp() {
        let files = Self.inputs("bmp")
        #expect(files.count > 0, "no inputs under \(Self.fuzzDirectory)/corpus/bmp")
        for file in files { FuzzTargets.bmp(FuzzReplay.read(file)) }
    }

    @Test("video seeds and reproducers: ffprobe's answer read within its limits, children supervised")
    func video() {
        let files = Self.inputs("video")
        #expect(files.count > 0, "no inputs under \(Self.fuzzDirectory)/corpus/video")
        for file in files { FuzzTargets.video(FuzzReplay.read(file)) }
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
        let count = FuzzReplay.main(name: "test", arguments: ["test", "-v", directory.file("b")], print: { printed.append($0) }) {
            replayed.append($0)
        }
        #expect(count == 1 && replayed == [Array("b".utf8)])
        #expect(printed == [directory.file("b"), "test: replayed 1 input(s)"])
    }
}
