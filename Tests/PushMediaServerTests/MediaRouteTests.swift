import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// `/media/<name>`: every format a profile passes through, caching headers, ranges, the
/// memory of recently served files.
extension RouterTests {
    /// A passthrough keeps its format: whatever a profile accepts, `/media` serves (a BMP for Android).
    @Test func mediaServesEveryFormatAProfilePassesThrough() async throws {
        for format in PlatformProfile.profiles.values.flatMap(\.acceptedFormats) {
            #expect(mediaContentTypes[format.fileExtension] == format.mime, "\(format.fileExtension)")
        }
        // 2:1 already, as Android's expanded image is: nothing to transcode.
        let picture = ImageFixtures.Picture(
            width: 16, height: 8, colours: [(200, 30, 40), (20, 180, 60)],
            indices: (0..<128).map { ($0 / 16 + $0) % 2 })
        let bmp = ImageFixtures.bmp(picture, .rgb24)
        origin.route("/small.bmp", .file(body: bmp, contentType: "image/bmp"))
        let server = try TestServer()
        try await server.test { client in
            let name = try await client.execute(
                uri: "/v1/process?profile=android", method: .post,
                body: ByteBuffer(json: payloadJSON(origin.url("/small.bmp")))
            ) { response in
                let body = try #require(response.body.object)
                #expect(body["outcome"]?.objectValue?["status"] == .string("passthrough"))
                let url = try #require(body["payload"]?.objectValue?["media_url"]?.stringValue)
                return try #require(url.split(separator: "/").last.map(String.init))
            }
            #expect(name.hasSuffix(".bmp"))
            try await client.execute(uri: "/media/\(name)", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "image/bmp")
                #expect([UInt8](response.body.readableBytesView) == bmp)
            }
        }
    }

    @Test func mediaIsServedWithCachingHeadersAndRanges() async throws {
        let server = try TestServer()
        let url = origin.url("/banner")
        try await server.test { client in
            let name = try await Self.storedName(of: url, client: client)
            let stored = try Data(contentsOf: URL(fileURLWithPath: server.store.path + "/" + name))
            let etag = "\"\(name.prefix(64))\""
            try await client.execute(uri: "/media/\(name)", method: .get) { response in
                #expect(response.status == .ok)
                #expect(Data(response.body.readableBytesView) == stored)
                #expect(response.headers[.contentType] == "image/jpeg")
                #expect(response.headers[.contentLength] == String(stored.count))
                #expect(response.headers[.eTag] == etag)
                #expect(response.headers[.cacheControl] == "public, max-age=31536000, immutable")
                #expect(response.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
            }
            try await client.execute(uri: "/media/\(name)", method: .head) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes == 0)
                #expect(response.headers[.contentLength] == String(stored.count))
            }
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.range: "bytes=0-9"]) { response in
                #expect(response.status == .partialContent)
                #expect(Data(response.body.readableBytesView) == stored.prefix(10))
                #expect(response.headers[.contentRange] == "bytes 0-9/\(stored.count)")
            }
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.range: "bytes=-5"]) { response in
                #expect(response.status == .partialContent)
                #expect(Data(response.body.readableBytesView) == stored.suffix(5))
            }
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.range: "bytes=\(stored.count)-"]) {
                response in
                #expect(response.status == .rangeNotSatisfiable)
                #expect(response.headers[.contentRange] == "bytes */\(stored.count)")
            }
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.ifNoneMatch: etag]) { response in
                #expect(response.status == .notModified)
            }
            for bad in [
                "0000000000000000000000000000000000000000000000000000000000000000.jpg", "..%2F..%2Fetc%2Fpasswd",
                ".index", name.uppercased(),
            ] {
                try await client.execute(uri: "/media/\(bad)", method: .get) { response in
                    #expect(response.status == .notFound, "\(bad)")
                }
            }
        }
    }

    @Test(arguments: [64_000_000, 0] as [Int64])
    func mediaIsServedOnlyWhileItsContentMatchesItsName(memory: Int64) async throws {
        let server = try TestServer(server: { $0.mediaMemory = memory })
        let url = origin.url("/banner")
        try await server.test { client in
            let name = try await Self.storedName(of: url, client: client)
            let path = server.store.path + "/" + name
            let stored = try Data(contentsOf: URL(fileURLWithPath: path))
            for _ in 0..<2 {  // the second answer comes from memory
                try await client.execute(uri: "/media/\(name)", method: .get) {
                    #expect(Data($0.body.readableBytesView) == stored)
                }
            }
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.range: "bytes=10-19"]) {
                response in
                #expect(response.status == .partialContent)
                #expect(Data(response.body.readableBytesView) == stored.subdata(in: 10..<20))
            }
            // Altered behind the store's back (one byte, same size): not what the name says, not served.
            var other = stored
            other[other.count / 2] ^= 0xFF
            try other.write(to: URL(fileURLWithPath: path), options: .atomic)
            try await client.execute(uri: "/media/\(name)", method: .get) { #expect($0.status == .notFound) }
            // Put back whole: served again.
            try stored.write(to: URL(fileURLWithPath: path), options: .atomic)
            try await client.execute(uri: "/media/\(name)", method: .get) {
                #expect(Data($0.body.readableBytesView) == stored)
            }
            // Truncated in place: not served either (neither the file nor the remembered copy).
            #expect(truncate(path, 1000) == 0)
            try await client.execute(uri: "/media/\(name)", method: .get) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.range: "bytes=0-9"]) {
                #expect($0.status == .notFound)
            }
            // Nor answered for: a HEAD, a conditional GET or an unsatisfiable range.
            try await client.execute(uri: "/media/\(name)", method: .head) { #expect($0.status == .notFound) }
            let etag = "\"\(name.prefix(64))\""
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.ifNoneMatch: etag]) {
                #expect($0.status == .notFound)
            }
            try await client.execute(uri: "/media/\(name)", method: .get, headers: [.range: "bytes=5000-"]) {
                #expect($0.status == .notFound)
            }
            unlink(path)
            try await client.execute(uri: "/media/\(name)", method: .get) { #expect($0.status == .notFound) }
        }
    }

    @Test func mediaMemoryEvictsTheLeastRecentlyUsed() throws {
        let memory = ServedFiles(limit: 1000)
        var info = stat()
        func identity(_ size: Int) -> ServedFiles.Identity {
            info.st_size = size
            return ServedFiles.Identity(info)
        }
        let bytes = ByteBuffer(repeating: 7, count: 400)
        memory.keep("a", identity: identity(400), bytes: bytes)
        memory.keep("b", identity: identity(400), bytes: bytes)
        #expect(memory.bytes("a", identity: identity(400)) != nil)  // a is now newer than b
        memory.keep("c", identity: identity(400), bytes: bytes)
        #expect(memory.total <= 1000)
        #expect(memory.bytes("b", identity: identity(400)) == nil)
        #expect(memory.bytes("a", identity: identity(400)) != nil && memory.bytes("c", identity: identity(400)) != nil)
        #expect(memory.bytes("a", identity: identity(401)) == nil)  // another version of the file drops the copy
        #expect(memory.bytes("a", identity: identity(400)) == nil)
        #expect(!ServedFiles(limit: 0).keeps(size: 1))
        #expect(!memory.keeps(size: 1001))
    }

    @Test func rangeParsing() {
        typealias Routes = StoredMedia
        #expect(Routes.parseRange("bytes=0-0", size: 10) == .satisfiable(0...0))
        #expect(Routes.parseRange("bytes=5-", size: 10) == .satisfiable(5...9))
        #expect(Routes.parseRange("bytes=-3", size: 10) == .satisfiable(7...9))
        #expect(Routes.parseRange("bytes=-30", size: 10) == .satisfiable(0...9))
        #expect(Routes.parseRange("bytes=8-100", size: 10) == .satisfiable(8...9))
        #expect(Routes.parseRange("bytes=10-", size: 10) == .unsatisfiable)
        #expect(Routes.parseRange("bytes=0-1,3-4", size: 10) == .ignored)
        #expect(Routes.parseRange("items=0-1", size: 10) == .ignored)
        #expect(Routes.parseRange("bytes=4-2", size: 10) == .ignored)
    }

    /// The stored file's name `/v1/process` gives the media of `url`.
    static func storedName(of url: String, client: any TestClientProtocol) async throws -> String {
        try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: payloadJSON(url))) {
            response in
            try #require(
                response.body.object?["payload"]?.objectValue?["media_url"]?.stringValue?.split(separator: "/").last
                    .map(String.init))
        }
    }
}
