import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Both store backends through the same seam: the local directory and a real S3-compatible object
/// store (OpenStack Swift with s3api, `scripts/object-store.sh`), with real libcurl signing.
@Suite("Store backends and retention", .serialized)
struct StoreTests {
    enum Backend: String, CaseIterable, CustomTestStringConvertible {
        case local, s3
        var testDescription: String { rawValue }
    }

    /// A store of `backend`, and a way to open a second one on the same data (another process).
    static func open(_ backend: Backend, work: TemporaryDirectory) throws -> (MediaStore, () throws -> MediaStore) {
        switch backend {
        case .local:
            let store = try MediaStore(directory: work.path + "/store")
            return (store, { try MediaStore(directory: work.path + "/store") })
        case .s3:
            let bucket = try TestObjectStore.makeBucket()
            let config = TestObjectStore.config(bucket: bucket, prefix: "p/q", work: work)
            return (try MediaStore(config: config), { try MediaStore(config: config) })
        }
    }

    static func entry(_ files: [StoredFile]) -> CacheEntry {
        CacheEntry(
            status: .processed, attachment: files[0], thumbnail: files.count > 1 ? files[1] : nil,
            sourceMIME: "image/jpeg",
            sourceBytes: 1, pipeline: PushMediaVersion.pipeline)
    }

    static func bytes(_ seed: UInt8, count: Int = 2000) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
    }

    /// The latest time the store lists for the index entries (or media) `names`.
    static func stamp(_ names: [String], _ area: StoreArea, in store: MediaStore) throws -> Date {
        let listed = try store.backend.list(area).filter { names.contains($0.name) }
        #expect(listed.count == names.count, "not listed: \(names)")
        return listed.map(\.modified).max() ?? .distantFuture
    }

    /// Runs `write` until the entry `key` it writes has a later time than `stamp` as the store
    /// lists it (again every 20 ms, for at most 5 s), and returns that time. The store's times
    /// are whole seconds (S3's, and a local file's as read): a write stamped later is newer.
    static func write(
        _ key: String, laterThan stamp: Date, in store: MediaStore, _ write: () throws -> Void
    ) throws -> Date {
        let giveUp = Date().addingTimeInterval(5)
        while true {
            try write()
            let written = try Self.stamp([key + ".json"], .index, in: store)
            if written > stamp || Date() > giveUp {
                #expect(written > stamp, "the store's time did not move past \(stamp)")
                return written
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    @Test(arguments: Backend.allCases)
    func storesReadsAndRemembersEntries(_ backend: Backend) throws {
        let work = TemporaryDirectory()
        let (store, reopen) = try Self.open(backend, work: work)
        try store.checkReady()
        let content = Self.bytes(1)
        let file = try store.put(content, format: .jpeg, width: 10, height: 20)
        #expect(file.name == S3Client.sha256(content) + ".jpg")
        #expect(try store.size(of: file.name) == Int64(content.count))
        let key = MediaStore.cacheKey(source: "https://example.com/a.jpg", options: "o")
        #expect(try store.lookup(key: key) == nil)
        try store.record(Self.entry([file]), key: key)
        #expect(store.remembered(key: key) == Self.entry([file]))

        // Another process reads the same entry from the index (one read), then from memory.
        let other = try reopen()
        #expect(other.remembered(key: key) == nil)
        #expect(try other.lookup(key: key) == Self.entry([file]))
        #expect(other.remembered(key: key) == Self.entry([file]))
        #expect(store.temporaryFiles().isEmpty && other.temporaryFiles().isEmpty)
    }

    @Test func keysAndNamesAreLowercaseSHA256Hex() {
        // FIPS 180-2's test vector for "abc".
        #expect(
            S3Client.sha256(Array("abc".utf8))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let key = MediaStore.cacheKey(source: "https://example.com/a.jpg", options: "o")
        #expect(
            key == S3Client.sha256(Array("pushmedia/\(PushMediaVersion.pipeline)\nhttps://example.com/a.jpg\no".utf8)))
    }

    @Test func s3ObjectsCarryTypeAndCachingHeaders() throws {
        let work = TemporaryDirectory()
        let bucket = try TestObjectStore.makeBucket(publicRead: true)
        let store = try MediaStore(config: TestObjectStore.config(bucket: bucket, prefix: "media", work: work))
        let content = try sampleMedia("photo-exif.jpg")
        let file = try store.put(content, format: .jpeg)
        let client = S3Client(settings: TestObjectStore.s3Settings(bucket: bucket))
        let object = try #require(try client.getObject("media/" + file.name, limit: 10 << 20))
        #expect(object.bytes == content)

        // The bucket's public URL serves it with the stored headers (what phones and CDNs see).
        let url = URL(string: TestObjectStore.publicURL + "/" + bucket + "/media/" + file.name)!
        let (data, response) = try fetch(url)
        #expect(response.statusCode == 200)
        #expect([UInt8](data) == content)
        #expect(response.value(forHTTPHeaderField: "Content-Type") == "image/jpeg")
        #expect(response.value(forHTTPHeaderField: "Cache-Control") == "public, max-age=31536000, immutable")
        // Index entries are not media: JSON under index/, nothing else under the prefix.
        try store.record(Self.entry([file]), key: "k1")
        let names = try client.list(prefix: "media/").map(\.name).sorted()
        #expect(names == [file.name, "index/k1.json"].sorted())
    }

    @Test func s3ErrorsNameEndpointBucketAndCode() throws {
        let work = TemporaryDirectory()
        let bucket = try TestObjectStore.makeBucket()
        var config = TestObjectStore.config(bucket: bucket, work: work)

        config.s3SecretKey = "wrong-secret"
        let wrongSecret = try MediaStore(config: config)
        let signature = #expect(throws: StoreError.self) { try wrongSecret.checkReady() }
        let signatureText = signature.map { "\($0)" } ?? ""
        #expect(
            signatureText.contains(TestObjectStore.endpoint) && signatureText.contains(bucket)
                && signatureText.contains("SignatureDoesNotMatch"))

        config = TestObjectStore.config(bucket: "pm-missing-bucket", work: work)
        let missing = try MediaStore(config: config)
        let noBucket = #expect(throws: StoreError.self) { try missing.checkReady() }
        #expect("\(noBucket.map { "\($0)" } ?? "")".contains("NoSuchBucket"))

        config.s3Endpoint = "http://127.0.0.1:9"  // discard port: nothing listens
        let unreachable = try MediaStore(config: config)
        let down = #expect(throws: StoreError.self) { try unreachable.checkReady() }
        let downText = down.map { "\($0)" } ?? ""
        #expect(downText.contains("http://127.0.0.1:9") && downText.contains("unreachable"))
    }

    @Test(arguments: Backend.allCases)
    func retentionRemovesUnusedEntriesAndUnreferencedFiles(_ backend: Backend) throws {
        let work = TemporaryDirectory()
        let (store, _) = try Self.open(backend, work: work)
        let old = try store.put(Self.bytes(1), format: .jpeg)
        let shared = try store.put(Self.bytes(2), format: .jpeg)
        try store.record(Self.entry([old, shared]), key: "old")
        try store.record(Self.entry([old]), key: "old2")
        let written = try Self.stamp(["old.json", "old2.json"], .index, in: store)
        var made: StoredFile?
        let freshWritten = try Self.write("fresh", laterThan: written, in: store) {
            let file = try store.put(Self.bytes(3), format: .png)
            try store.record(Self.entry([file, shared]), key: "fresh")
            made = file
        }
        let fresh = try #require(made)
        // Both passes judge ages from half a second past the fresh entry's time (a second or more
        // past the old ones'), however slowly they run (sanitizer builds).
        let now = freshWritten.addingTimeInterval(0.5)

        let policy = RetentionPolicy(olderThan: .seconds(1), dryRun: true, grace: .seconds(1))
        let dry = try store.collectGarbage(policy, now: now)
        #expect(dry.entriesRemoved == 2 && dry.entriesKept == 1 && dry.mediaRemoved == 1 && dry.mediaKept == 2)
        #expect(try store.size(of: old.name) != nil)

        var real = policy
        real.dryRun = false
        let report = try store.collectGarbage(real, now: now)
        #expect(
            report
                == RetentionReport(
                    dryRun: false, entriesKept: 1, entriesRemoved: 2, mediaKept: 2, mediaRemoved: 1,
                    bytesKept: fresh.bytes + shared.bytes, bytesRemoved: old.bytes))
        #expect(try store.size(of: old.name) == nil)
        #expect(try store.size(of: shared.name) != nil && store.size(of: fresh.name) != nil)
        #expect(try store.lookup(key: "old") == nil)
        #expect(try store.lookup(key: "fresh") != nil)
    }

    @Test(arguments: Backend.allCases)
    func maxBytesRemovesLeastRecentlyUsedFirst(_ backend: Backend) throws {
        let work = TemporaryDirectory()
        let (store, _) = try Self.open(backend, work: work)
        var files: [StoredFile] = []
        for seed in UInt8(1)...3 {
            let put = { () throws -> StoredFile in
                let file = try store.put(Self.bytes(seed, count: 1000 * Int(seed)), format: .jpeg)
                try store.record(Self.entry([file]), key: "k\(seed)")
                return file
            }
            if seed < 3 {
                files.append(try put())
            } else {
                // The newest used later than the others.
                let earlier = try Self.stamp(["k1.json", "k2.json"], .index, in: store)
                _ = try Self.write("k3", laterThan: earlier, in: store) { files.append(try put()) }
            }
        }
        // Room for the newest only (3,000 bytes): k1 and k2 go, oldest first.
        let report = try store.collectGarbage(RetentionPolicy(olderThan: .seconds(3600), maxBytes: 3500, grace: .zero))
        #expect(report.entriesRemoved == 2 && report.mediaRemoved == 2 && report.bytesKept == 3000)
        #expect(try store.lookup(key: "k3") != nil)
        #expect(try store.size(of: files[0].name) == nil && store.size(of: files[1].name) == nil)
    }

    /// Another process keeps storing the bytes of a doomed file and writing entries that reference
    /// it while retention runs: every entry left must find its files.
    @Test(arguments: Backend.allCases)
    func retentionIsSafeWithAConcurrentWriter(_ backend: Backend) throws {
        let work = TemporaryDirectory()
        let (store, reopen) = try Self.open(backend, work: work)
        var doomed: [[UInt8]] = []
        for seed in UInt8(10)..<UInt8(18) {
            let content = Self.bytes(seed)
            doomed.append(content)
            try store.record(Self.entry([try store.put(content, format: .jpeg)]), key: "stale\(seed)")
        }
        // What is written from now on is stamped later than the doomed entries and files.
        let staled = try Self.stamp((10..<18).map { "stale\($0).json" }, .index, in: store)
        let later = try Self.write("probe", laterThan: staled, in: store) {
            try store.record(Self.entry([try store.put(Self.bytes(99), format: .jpeg)]), key: "probe")
        }
        let writer = try reopen()
        let contents = doomed
        let stop = Locked(false)
        let written = Locked(0)
        let thread = Thread {
            var round = 0
            while !stop.withLock({ $0 }) {
                let content = contents[round % contents.count]
                if let file = try? writer.put(content, format: .jpeg) {
                    try? writer.record(Self.entry([file]), key: "new\(round)")
                    written.withLock { $0 += 1 }
                }
                round += 1
            }
        }
        thread.start()
        while written.withLock({ $0 }) < 2 { Thread.sleep(forTimeInterval: 0.01) }
        let report = try store.collectGarbage(
            RetentionPolicy(olderThan: .seconds(1), grace: .seconds(1)), now: later.addingTimeInterval(0.5))
        stop.withLock { $0 = true }
        while !thread.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        #expect(report.entriesRemoved >= doomed.count)

        // Every entry that remains names files that exist.
        let checker = try reopen()
        let entries = try checker.backend.list(.index)
        #expect(entries.count >= 2)
        for info in entries {
            let key = String(info.name.dropLast(5))
            let (data, _) = try #require(try checker.backend.readEntry(key, deadline: nil))
            let entry = try JSONDecoder().decode(CacheEntry.self, from: Data(data))
            for file in entry.files {
                #expect(
                    try checker.size(of: file.name) == file.bytes,
                    "entry \(key) names \(file.name), which retention removed")
            }
        }
    }

    @Test func theIndexCacheEvictsTheLeastRecentlyUsed() {
        let cache = EntryCache(capacity: 3)
        let entry = Self.entry([
            StoredFile(name: String(repeating: "a", count: 64) + ".jpg", mime: "image/jpeg", bytes: 1)
        ])
        let start = Date()
        func hit(
            _ key: String, after seconds: Double = 0, maxAge: Duration = .seconds(86_400), checkEvery: Duration = .zero
        )
            -> (entry: CacheEntry, due: Bool, check: Bool)?
        {
            cache.hit(
                key, now: start.addingTimeInterval(seconds), interval: .seconds(3600), maxAge: maxAge,
                checkEvery: checkEvery)
        }
        for key in ["a", "b", "c"] { cache.insert(key, entry: entry, used: start, loaded: start) }
        // a is now the newest
        #expect(hit("a")?.due == false)
        cache.insert("d", entry: entry, used: start, loaded: start)  // evicts b
        #expect(hit("b") == nil)
        #expect(hit("c") != nil)
        cache.remove("a")
        cache.insert("e", entry: entry, used: start, loaded: start)  // takes a's slot
        #expect(cache.count == 3)
        #expect(hit("d") != nil)
        // Use is due again once the interval has passed, then not until the next one.
        #expect(hit("e", after: 3601)?.due == true)
        #expect(hit("e", after: 3602)?.due == false)
        // Held longer than its maximum age, an entry is read from the index again.
        #expect(hit("e", after: 61, maxAge: .seconds(60)) == nil)
        cache.insert("e", entry: entry, used: start, loaded: start.addingTimeInterval(61))
        #expect(hit("e", after: 62, maxAge: .seconds(60)) != nil)
        // Its files are checked on the first hit, then not again until `checkEvery` has passed.
        cache.insert("f", entry: entry, used: start, loaded: start)
        #expect(hit("f", checkEvery: .milliseconds(250))?.check == true)
        #expect(hit("f", after: 0.2, checkEvery: .milliseconds(250))?.check == false)
        #expect(hit("f", after: 0.3, checkEvery: .milliseconds(250))?.check == true)
        #expect(hit("f", after: 0.4, checkEvery: .milliseconds(250))?.check == false)
    }

    @Test func storeLocationsAndSettings() throws {
        #expect(try StoreLocation("pushmedia-store") == .directory("pushmedia-store"))
        #expect(try StoreLocation("s3://media-bucket") == .s3(bucket: "media-bucket", prefix: ""))
        #expect(try StoreLocation("s3://media-bucket/prod/push/") == .s3(bucket: "media-bucket", prefix: "prod/push"))
        #expect(throws: StoreError.self) { try StoreLocation("s3://UPPER") }
        #expect(throws: StoreError.self) { try StoreLocation("s3://ok-bucket/a/../b") }

        let config = try PushMediaConfig.fromEnvironment([
            "PUSHMEDIA_STORE": "s3://media-bucket/push", "PUSHMEDIA_S3_ENDPOINT": "http://127.0.0.1:9480/",
            "AWS_ACCESS_KEY_ID": "aws-key", "AWS_SECRET_ACCESS_KEY": "aws-secret",
            "PUSHMEDIA_S3_SECRET_ACCESS_KEY": "own-secret",
            "PUSHMEDIA_S3_REGION": "eu-west-1", "PUSHMEDIA_GC_OLDER_THAN": "2w",
        ])
        let settings = try config.s3Settings(bucket: "media-bucket", prefix: "push")
        #expect(
            settings
                == S3Settings(
                    endpoint: "http://127.0.0.1:9480", region: "eu-west-1", bucket: "media-bucket", prefix: "push",
                    accessKey: "aws-key", secretKey: "own-secret"))
        #expect(config.gcOlderThan == .seconds(14 * 86_400))
        var missing = PushMediaConfig()
        missing.storeLocation = "s3://media-bucket"
        let error = #expect(throws: StoreError.self) { _ = try MediaStore(config: missing) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("--s3-endpoint"))
        #expect(throws: ConfigError.self) {
            try PushMediaConfig.fromEnvironment(["PUSHMEDIA_S3_ENDPOINT": "http://host/path"])
        }
        #expect(
            S3Client(settings: settings).url(key: "push/a b.jpg", query: [("prefix", "push/"), ("list-type", "2")])
                == "http://127.0.0.1:9480/media-bucket/push/a%20b.jpg?list-type=2&prefix=push%2F")
    }

    /// A blocking GET with URLSession's delegate-free API, for public object URLs.
    func fetch(_ url: URL) throws -> (Data, HTTPURLResponse) {
        let result = Locked<(Data?, URLResponse?)>((nil, nil))
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: url) { data, response, _ in
            result.withLock { $0 = (data, response) }
            done.signal()
        }.resume()
        done.wait()
        let (data, response) = result.withLock { $0 }
        return (data ?? Data(), try #require(response as? HTTPURLResponse))
    }
}
