import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// SHA-256 names every stored file: the same digests as before, from memory and from files of
/// every size (empty, under one read block, several blocks).
@Suite struct HashTests {
    @Test func knownDigests() {
        let abc = Array("abc".utf8).withUnsafeBytes { MediaStore.sha256($0) }
        #expect(abc == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let empty = [UInt8]().withUnsafeBytes { MediaStore.sha256($0) }
        #expect(empty == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test(arguments: [0, 1, 1 << 20, (1 << 20) + 1, 3_000_017])
    func filesHashAsTheirBytes(size: Int) throws {
        let directory = TemporaryDirectory()
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let path = directory.file("data")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try MediaStore.sha256(file: path) == bytes.withUnsafeBytes { MediaStore.sha256($0) })
    }

    @Test func aMissingFileSaysWhich() {
        #expect(throws: StoreError.self) { try MediaStore.sha256(file: "/nonexistent/pushmedia-hash-test") }
    }
}
