import Foundation
import PushMediaFuzzTargets
import PushMediaTestSupport
import Testing

/// Replays the committed fuzz seeds and crash reproducers (fuzz/corpus/TARGET and
/// fuzz/crashes/TARGET) through the fuzz targets, whose invariants are preconditions: a
/// regression crashes the test run. To find the failing file:
/// `swift build --product fuzz && .build/debug/fuzz payload -v fuzz/corpus/payload fuzz/crashes/payload`.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    /// The repository's fuzz/ directory, next to samples/.
    static let fuzzDirectory = URL(fileURLWithPath: samplesDirectory).deletingLastPathComponent()
        .appendingPathComponent("fuzz").path

    static func inputs(_ target: String) -> [String] {
        FuzzReplay.files(["corpus", "crashes"].map { "\(fuzzDirectory)/\($0)/\(target)" })
    }

    @Test(
        "seeds and reproducers keep their target's invariants", arguments: ["payload", "media", "bmp", "video", "h2"])
    func replay(_ target: String) throws {
        let run = try #require(FuzzTargets.target(target))
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
            arguments: ["fuzz", "test", "-v", directory.file("b")], print: { printed.append($0) },
            targets: { name in name == "test" ? { replayed.append($0) } : nil })
        #expect(count == 1 && replayed == [Array("b".utf8)])
        #expect(printed == [directory.file("b"), "fuzz test: replayed 1 input(s)"])
        #expect(FuzzReplay.main(arguments: ["fuzz", "nothing"], print: { printed.append($0) }) == nil)
        #expect(printed.last?.hasPrefix("usage: fuzz payload|media|bmp|video|h2") == true)
    }
}
