import Crypto
import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Several `pushmedia serve` processes (pipelines, where the test moves the clock) on one bucket
/// of a real S3-compatible object store (OpenStack Swift with s3api, `scripts/object-store.sh`),
/// fetching from a real origin.
@Suite("Fleet: serve nodes on one bucket", .serialized)
struct FleetTests {
    typealias Server = ServeEndToEndTests.Server

    static func node(bucket: String, work: TemporaryDirectory, _ extra: [String] = []) throws -> Server {
        try Server(
            arguments: [
                "--store", "s3://\(bucket)/media", "--s3-endpoint", TestObjectStore.endpoint, "--work-dir", work.path,
                "--allow-private-networks", "--base-url", TestObjectStore.publicURL + "/" + bucket + "/media",
            ] + extra,
            environment: TestObjectStore.environment)
    }

    static func process(_ server: Server, _ payload: String, budgetMs: Int = 10_000) async throws -> (
        outcome: JSONObject, payload: JSONObject
    ) {
        let (response, data) = try await ServeProcess.request(
            server.url("/v1/process?budget_ms=\(budgetMs)"), method: "POST", body: payload,
            headers: ["Content-Type": "application/json"])
        #expect(response.statusCode == 200)
        let body = try #require(try JSONValue.parse(data).objectValue)
        return (try #require(body["outcome"]?.objectValue), try #require(body["payload"]?.objectValue))
    }

    static func payload(_ url: String) -> String {
        #"{"aps":{"alert":{"title":"Spring sale","body":"Up to 40% off"},"mutable-content":1},"image_url":"\#(url)"}"#
    }

    /// `pushmedia ARGUMENTS` run to its end with the object store's credentials (`environment`
    /// over them) and none of the caller's `PUSHMEDIA_*` or `AWS_*`: its exit status, standard
    /// output and standard error (each written to a file, so neither can fill a pipe).
    static func pushmedia(_ arguments: [String], environment: [String: String] = [:]) throws -> (
        status: Int32, out: String, err: String
    ) {
        let files = TemporaryDirectory()
        let (outPath, errPath) = (files.file("out"), files.file("err"))
        FileManager.default.createFile(atPath: outPath, contents: nil)
        FileManager.default.createFile(atPath: errPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pushmediaExecutable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("PUSHMEDIA_") && !$0.key.hasPrefix("AWS_")
        }.merging(TestObjectStore.environment) { _, given in given }.merging(environment) { _, given in given }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        try process.run()
        process.waitUntilExit()
        func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return (process.terminationStatus, text(outPath), text(errPath))
    }

    static func hex(_ bytes: Data) -> String { SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() }

    /// Every media object in the bucket holds exactly the bytes its name says, and every index
    /// entry names objects that exist: nothing partial, nothing dangling.
    static func expectWholeBucket(_ bucket: String) throws {
        let client = S3Client(settings: TestObjectStore.s3Settings(bucket: bucket))
        let objects = try client.list(prefix: "media/")
        let media = objects.filter { !$0.name.hasPrefix("index/") }
        for object in media {
            #expect(MediaStore.isValidName(object.name), "unexpected object \(object.name)")
            let bytes = try #require(try client.getObject("media/" + object.name, limit: 60 << 20)).bytes
            #expect(hex(Data(bytes)) + "." + (object.name.split(separator: ".").last ?? "") == object.name)
        }
        for entry in objects where entry.name.hasPrefix("index/") {
            let bytes = try #require(try client.getObject("media/" + entry.name, limit: 1 << 20)).bytes
            let decoded = try JSONDecoder().decode(CacheEntry.self, from: Data(bytes))
            for file in decoded.files { #expect(media.contains { $0.name == file.name && $0.bytes == file.bytes }) }
        }
    }

    @Test func aSecondNodeAnswersFromTheSharedCacheWithoutTheOrigin() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/campaign/hero", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "application/octet-stream"))
        let bucket = try TestObjectStore.makeBucket(publicRead: true)
        let (workA, workB) = (TemporaryDirectory(), TemporaryDirectory())
        let a = try Self.node(bucket: bucket, work: workA)
        let b = try Self.node(bucket: bucket, work: workB)
        let payload = Self.payload(origin.url("/campaign/hero"))

        let first = try await Self.process(a, payload)
        #expect(first.outcome["status"] == .string("processed"))
        #expect(first.outcome["cache_hit"] == .bool(false))
        #expect(origin.hits("/campaign/hero") == 1)

        let second = try await Self.process(b, payload)
        #expect(second.outcome["status"] == .string("processed"))
        #expect(second.outcome["cache_hit"] == .bool(true))
        #expect(origin.hits("/campaign/hero") == 1, "node B fetched from the origin again")
        let url = try #require(second.payload["image_url"]?.stringValue)
        #expect(url == first.payload["image_url"]?.stringValue)
        #expect(url.hasPrefix(TestObjectStore.publicURL + "/" + bucket + "/media/") && url.hasSuffix(".jpg"))
        #expect(second.payload["aps"] == (try JSONValue.parse(Array(payload.utf8)).objectValue?["aps"]))

        // Phones get the object from the bucket's public URL: right type, bytes and caching.
        let (public_, bytes) = try await ServeProcess.request(URL(string: url)!)
        #expect(public_.statusCode == 200)
        #expect(public_.value(forHTTPHeaderField: "Content-Type") == "image/jpeg")
        #expect(public_.value(forHTTPHeaderField: "Cache-Control") == "public, max-age=31536000, immutable")
        let name = String(url.split(separator: "/").last!)
        #expect(Self.hex(bytes) + ".jpg" == name)
        #expect(Array(bytes.prefix(3)) == [0xFF, 0xD8, 0xFF])
        if let thumb = (second.payload["pushmedia"]?.objectValue?["thumb"]?.stringValue).flatMap(URL.init(string:)) {
            let (response, _) = try await ServeProcess.request(thumb)
            #expect(response.statusCode == 200)
        } else {
            Issue.record("no thumbnail in the descriptor")
        }

        // The hook's own /media streams the same object from the bucket, ranges included.
        let (whole, streamed) = try await ServeProcess.request(b.url("/media/" + name))
        #expect(whole.statusCode == 200 && streamed == bytes)
        #expect(whole.value(forHTTPHeaderField: "Content-Length") == String(bytes.count))
        let (partial, slice) = try await ServeProcess.request(
            b.url("/media/" + name), headers: ["Range": "bytes=100-1099"])
        #expect(partial.statusCode == 206 && slice == bytes[100..<1100])
        #expect(partial.value(forHTTPHeaderField: "Content-Range") == "bytes 100-1099/\(bytes.count)")
        let (head, empty) = try await ServeProcess.request(b.url("/media/" + name), method: "HEAD")
        #expect(
            head.statusCode == 200 && empty.isEmpty
                && head.value(forHTTPHeaderField: "Content-Length") == String(bytes.count))
        let (missing, _) = try await ServeProcess.request(b.url("/media/" + String(repeating: "0", count: 64) + ".jpg"))
        #expect(missing.statusCode == 404)

        try Self.expectWholeBucket(bucket)
        #expect(a.stop() == 0 && b.stop() == 0)
    }

    @Test func aNodeKilledMidJobLeavesNothingPartial() async throws {
        let origin = try TestOrigin()
        let photo = try sampleMedia("banner.webp")
        origin.route("/banner", .file(body: photo, contentType: "image/webp"))
        let bucket = try TestObjectStore.makeBucket()
        let work = TemporaryDirectory()
        let a = try Self.node(bucket: bucket, work: work)
        let payload = Self.payload(origin.url("/banner"))
        let answered = Locked(false)
        let request = Task {
            _ = try? await Self.process(a, payload)
            answered.withLock { $0 = true }
        }
        // Killed at the end of the download: once A's work folder holds the whole source (unless
        // the job is over by then).
        let incoming = work.path + "/.incoming"
        let downloaded = try await eventually(within: .seconds(20)) {
            let files = (try? FileManager.default.subpathsOfDirectory(atPath: incoming)) ?? []
            return answered.withLock { $0 }
                || files.contains {
                    (try? FileManager.default.attributesOfItem(atPath: incoming + "/" + $0))?[.size] as? NSNumber
                        == NSNumber(value: photo.count)
                }
        }
        #expect(downloaded, "the download never ended")
        kill(a.process.processIdentifier, SIGKILL)
        _ = await request.value
        a.process.waitUntilExit()
        #expect(a.process.terminationReason == .uncaughtSignal)
        try Self.expectWholeBucket(bucket)

        // Node B (same work folder) removes A's abandoned work files and answers by itself.
        let b = try Self.node(bucket: bucket, work: work)
        let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: work.path + "/.incoming")) ?? []
        #expect(
            leftovers.allSatisfy { $0.hasPrefix("\(b.process.processIdentifier)-") },
            "A's work folder remains: \(leftovers)")
        let answer = try await Self.process(b, payload)
        #expect(answer.outcome["status"] == .string("processed"))
        try Self.expectWholeBucket(bucket)
        #expect(b.stop() == 0)
    }

    @Test func losingTheStoreGivesDefinedAnswersAndReadinessRecovers() async throws {
        let origin = try TestOrigin()
        origin.route("/a.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        origin.route("/b.webp", .file(body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let bucket = try TestObjectStore.makeBucket()
        let work = TemporaryDirectory()
        let node = try Self.node(bucket: bucket, work: work)
        defer { try? TestObjectStore.start() }
        let before = try await Self.process(node, Self.payload(origin.url("/a.jpg")))
        #expect(before.outcome["status"] == .string("processed"))
        let (ready, _) = try await ServeProcess.request(node.url("/readyz"))
        #expect(ready.statusCode == 200)

        try TestObjectStore.stop()
        // A new media reference: answered within its budget, text and original URL kept.
        let started = ContinuousClock.now
        let during = try await Self.process(node, Self.payload(origin.url("/b.webp")), budgetMs: 3000)
        #expect(ContinuousClock.now - started < .milliseconds(3100))
        #expect(during.outcome["status"] == .string("best_attempt"))
        #expect(during.outcome["reason"] == .string("store_unavailable"))
        #expect(during.payload["image_url"] == .string(origin.url("/b.webp")))
        #expect(during.payload["aps"]?.objectValue?["alert"]?.objectValue?["title"] == .string("Spring sale"))
        // What this node processed before is still answered from its memory.
        let remembered = try await Self.process(node, Self.payload(origin.url("/a.jpg")), budgetMs: 3000)
        #expect(remembered.outcome["status"] == .string("processed"))
        let (down, detail) = try await ServeProcess.request(node.url("/readyz"))
        #expect(down.statusCode == 503)
        let text = String(decoding: detail, as: UTF8.self)
        #expect(text.contains(TestObjectStore.endpoint) && text.contains("unreachable"), "\(text)")

        try TestObjectStore.start()
        var recovered = false
        for _ in 0..<100 where !recovered {
            recovered = try await ServeProcess.request(node.url("/readyz")).0.statusCode == 200
            if !recovered { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(recovered)
        let after = try await Self.process(node, Self.payload(origin.url("/b.webp")))
        #expect(after.outcome["status"] == .string("processed"))
        try Self.expectWholeBucket(bucket)
        #expect(node.stop() == 0)
    }

    /// A URL whose bytes change at the origin: after the freshness lifetime the next request, on
    /// either node, gets the new attachment; the other node then answers it from the shared index
    /// without the origin; a 304 renews without a transcode; `pushmedia purge` reaches every node.
    /// The nodes are two pipelines on one bucket, each with its memory, on a clock the test moves.
    @Test func freshnessAcrossTwoNodes() async throws {
        let origin = try TestOrigin()
        let (first, second) = (try sampleMedia("photo-exif.jpg"), try sampleMedia("banner.webp"))
        origin.route(
            "/banner.jpg",
            .cacheable(
                body: first, contentType: "image/jpeg", etag: "\"v1\"", lastModified: nil, cacheControl: "max-age=1"))
        let bucket = try TestObjectStore.makeBucket()
        let (workA, workB) = (TemporaryDirectory(), TemporaryDirectory())
        let clock = TestClock()
        let settings = ["--min-ttl", "4s", "--index-cache-ttl", "1s"]
        func node(_ work: TemporaryDirectory) throws -> Pipeline {
            var config = TestObjectStore.config(bucket: bucket, work: work)
            config.minTTL = .seconds(4)
            config.indexCacheTTL = .seconds(1)
            return try Pipeline(config: config, clock: clock.wall)
        }
        let (a, b) = (try node(workA), try node(workB))
        let payload = Array(Self.payload(origin.url("/banner.jpg")).utf8)

        let made = try await a.process(payload)
        #expect(made.outcome.status == .processed && made.outcome.cacheHit == false)
        let old = try #require(made.payload["image_url"]?.stringValue)
        let fromB = try await b.process(payload)
        #expect(fromB.outcome.cacheHit == true && fromB.payload["image_url"]?.stringValue == old)
        #expect(origin.hits("/banner.jpg") == 1)

        // The banner is replaced at the origin; after its lifetime node B revalidates and gets it.
        origin.route(
            "/banner.jpg",
            .cacheable(
                body: second, contentType: "image/webp", etag: "\"v2\"", lastModified: nil, cacheControl: "max-age=1"))
        clock.advance(by: .seconds(4))  // --min-ttl
        let changed = try await b.process(payload)
        #expect(changed.outcome.status == .processed && changed.outcome.cacheHit == false)
        #expect(changed.outcome.sourceMIME == "image/webp")
        let new = try #require(changed.payload["image_url"]?.stringValue)
        #expect(new != old)
        #expect(origin.hits("/banner.jpg") == 2 && origin.notModified("/banner.jpg") == 0)
        // Node A's memory is past --index-cache-ttl: it reads B's entry from the index, no origin request.
        let seen = try await a.process(payload)
        #expect(seen.outcome.cacheHit == true && seen.payload["image_url"]?.stringValue == new)
        #expect(origin.hits("/banner.jpg") == 2)

        // Unchanged after the next lifetime: a 304 renews the entry, no transcode, same attachment.
        clock.advance(by: .seconds(4))
        let renewed = try await a.process(payload)
        #expect(renewed.outcome.status == .processed && renewed.outcome.revalidated == true)
        #expect(renewed.outcome.cacheHit == true && renewed.payload["image_url"]?.stringValue == new)
        #expect(origin.hits("/banner.jpg") == 3 && origin.notModified("/banner.jpg") == 1)
        #expect(renewed.outcome.timingsMs.transcode == 0)
        let renewedFromB = try await b.process(payload)
        #expect(renewedFromB.outcome.cacheHit == true && renewedFromB.outcome.revalidated == nil)
        #expect(origin.hits("/banner.jpg") == 3, "node B reads the renewed entry from the index")

        // An operator purges the URL: both nodes fetch it again (within --index-cache-ttl).
        let purge =
            [
                "purge", origin.url("/banner.jpg"), "--store", "s3://\(bucket)/media", "--s3-endpoint",
                TestObjectStore.endpoint,
                "--work-dir", workA.path, "--allow-private-networks", "--base-url",
                TestObjectStore.publicURL + "/" + bucket + "/media",
            ] + settings
        let purged = try Self.pushmedia(purge)
        #expect(purged.status == 0)
        #expect(purged.out.contains("purged \(origin.url("/banner.jpg")): 1 cache entry removed"), "\(purged.out)")
        // Again: nothing is cached for it now, which is said, with exit 1.
        let again = try Self.pushmedia(purge)
        #expect(again.status == 1, "\(again.err)")
        #expect(again.err.contains("nothing cached for \(origin.url("/banner.jpg"))"), "\(again.err)")
        clock.advance(by: .seconds(1))  // --index-cache-ttl
        let refetched = try await b.process(payload)
        #expect(refetched.outcome.cacheHit == false && refetched.payload["image_url"]?.stringValue == new)
        #expect(
            origin.hits("/banner.jpg") == 4 && origin.notModified("/banner.jpg") == 1,
            "a purged entry is fetched unconditionally")
        try Self.expectWholeBucket(bucket)
    }

    /// `pushmedia serve` refuses to start on a store it cannot use, saying which and why.
    @Test func startupErrorsNameEndpointBucketAndCode() throws {
        let bucket = try TestObjectStore.makeBucket()
        let work = TemporaryDirectory()
        func start(
            _ store: String, endpoint: String = TestObjectStore.endpoint, secret: String = TestObjectStore.secretKey
        ) throws -> (Int32, String) {
            let run = try Self.pushmedia(
                ["serve", "--port", "0", "--store", store, "--s3-endpoint", endpoint, "--work-dir", work.path],
                environment: ["AWS_SECRET_ACCESS_KEY": secret])
            return (run.status, run.err)
        }
        let (wrongStatus, wrong) = try start("s3://\(bucket)", secret: "not-the-secret")
        #expect(wrongStatus == 74)
        #expect(
            wrong.contains(TestObjectStore.endpoint) && wrong.contains("\"\(bucket)\"")
                && wrong.contains("SignatureDoesNotMatch"), "\(wrong)")
        let (missingStatus, missing) = try start("s3://pm-no-such-bucket/x")
        #expect(missingStatus == 74)
        #expect(missing.contains("pm-no-such-bucket") && missing.contains("NoSuchBucket"), "\(missing)")
        let (downStatus, down) = try start("s3://\(bucket)", endpoint: "http://127.0.0.1:9")
        #expect(downStatus == 74)
        #expect(down.contains("http://127.0.0.1:9") && down.contains("unreachable"), "\(down)")
    }

    /// `pushmedia gc` against the bucket the nodes use: a dry run reports, a real run removes.
    @Test func gcCommandOnTheBucket() async throws {
        let origin = try TestOrigin()
        origin.route("/a.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        let bucket = try TestObjectStore.makeBucket()
        let work = TemporaryDirectory()
        let node = try Self.node(bucket: bucket, work: work)
        #expect(
            try await Self.process(node, Self.payload(origin.url("/a.jpg"))).outcome["status"] == .string("processed"))
        #expect(node.stop() == 0)

        func gc(_ arguments: [String]) throws -> (Int32, JSONObject?) {
            let run = try Self.pushmedia(
                [
                    "gc", "--store", "s3://\(bucket)/media", "--s3-endpoint", TestObjectStore.endpoint, "--work-dir",
                    work.path, "--json",
                ] + arguments)
            return (run.status, try? JSONValue.parse(Array(run.out.utf8)).objectValue)
        }
        // --verify reads every object again: one overwritten with other bytes under its name is
        // reported (dry run), then removed; the others stay.
        let client = S3Client(settings: TestObjectStore.s3Settings(bucket: bucket))
        let objects = try client.list(prefix: "media/").filter { !$0.name.contains("/") }
        let victim = try #require(objects.first?.name)
        try client.putObject(
            "media/" + victim, body: .bytes(Array("not the picture".utf8)), contentType: "image/jpeg", cacheControl: nil
        )
        let (checkStatus, check) = try gc(["--older-than", "1d", "--verify", "--dry-run"])
        #expect(checkStatus == 0)
        #expect(check?["verify"]?.objectValue?["checked"] == .number(String(objects.count)))
        #expect(check?["verify"]?.objectValue?["corrupt"] == .array([.string(victim)]))
        #expect(check?["verify"]?.objectValue?["removed"] == .number("0"))
        #expect(try client.headObject("media/" + victim) != nil)
        let (_, healed) = try gc(["--older-than", "1d", "--verify"])
        #expect(healed?["verify"]?.objectValue?["removed"] == .number("1"))
        #expect(try client.headObject("media/" + victim) == nil)
        #expect(try client.list(prefix: "media/").filter { !$0.name.contains("/") }.count == objects.count - 1)

        // Fresh entries stay.
        let (status, kept) = try gc(["--older-than", "1d"])
        #expect(status == 0)
        #expect(kept?["entries_kept"] == .number("1") && kept?["entries_removed"] == .number("0"))
        // --max-bytes 0 removes the entry; its files are younger than the grace period and stay for now.
        let (dryStatus, dry) = try gc(["--max-bytes", "0", "--dry-run"])
        #expect(dryStatus == 0 && dry?["dry_run"] == .bool(true) && dry?["entries_removed"] == .number("1"))
        #expect(try client.list(prefix: "media/index/").count == 1)
        let (_, real) = try gc(["--max-bytes", "0"])
        #expect(real?["entries_removed"] == .number("1") && real?["media_removed"] == .number("0"))
        #expect(try client.list(prefix: "media/index/").isEmpty)
    }
}
