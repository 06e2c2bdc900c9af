import Foundation
import PushMedia
import PushMediaTestSupport
import Testing

/// Bursts of downloads from a `pushmedia serve` node on the real object store (OpenStack Swift
/// with s3api): more requests at once than any pool of the process has threads, slow clients
/// beside fast ones, the store stopped half way, SIGTERM in the middle. The clients are
/// `Tests/burst/burst.py` (one connection each, bodies hashed).
@Suite("Bursts of downloads from an object store", .serialized)
struct MediaBurstTests {
    /// Requests at once: more than every pool (64 fetch threads, 4 readers, 2 per core).
    static let burstSize = underSanitizer ? 100 : 500

    /// A node on a new public bucket with media URLs for `origin`, and one stored JPEG made
    /// from `side`² pixels of noise (1750: about 2 MB; 3600: about 8 MB, more than a socket's
    /// send buffer holds, so a slow client holds its transfer).
    struct Setup {
        let origin: TestOrigin
        let bucket: String
        let work: TemporaryDirectory
        let node: ServeProcess
        /// The stored file's name (`<sha256>.jpg`).
        let name: String
        /// A media URL whose answer is that file.
        let mediaURL: String

        var hash: String { String(name.prefix(64)) }
    }

    static func setup(side: Int, _ extra: [String] = [], localStore: Bool = false) async throws -> Setup {
        let origin = try TestOrigin()
        origin.route("/burst/noise.bmp", .file(body: noiseBMP(side: side), contentType: "image/bmp"))
        let work = TemporaryDirectory()
        let bucket = localStore ? "" : try TestObjectStore.makeBucket(publicRead: true)
        let store =
            localStore
            ? ["--store", work.file("store")]
            : [
                "--store", "s3://\(bucket)/media", "--s3-endpoint", TestObjectStore.endpoint, "--work-dir", work.path,
                "--base-url", TestObjectStore.publicURL + "/" + bucket + "/media",
            ]
        let node = try ServeProcess(
            arguments: store + [
                "--allow-private-networks", "--url-allow-source", origin.url("/"), "--long-edge", "4096",
            ] + extra,
            environment: TestObjectStore.environment)
        let source = origin.url("/burst/noise.bmp")
        let payload = #"{"aps":{"alert":{"title":"Sale","body":"Now"},"mutable-content":1},"image_url":"\#(source)"}"#
        let (response, data) = try await ServeProcess.request(
            node.url("/v1/process?budget_ms=30000"), method: "POST", body: payload,
            headers: ["Content-Type": "application/json"])
        #expect(response.statusCode == 200)
        let answer = try #require(try JSONValue.parse(data).objectValue)
        let url = try #require(answer["payload"]?.objectValue?["image_url"]?.stringValue)
        let name = String(try #require(url.split(separator: "/").last))
        #expect(MediaStore.isValidName(name) && name.hasSuffix(".jpg"), "not processed: \(answer)")
        return Setup(
            origin: origin, bucket: bucket, work: work, node: node, name: name,
            mediaURL: "/insecure/pr:ios/plain/\(source)@jpg")
    }

    /// A BMP of `side`² pixels of noise: a JPEG of it barely compresses.
    static func noiseBMP(side: Int) -> [UInt8] {
        let row = (side * 3 + 3) / 4 * 4
        let size = 54 + row * side
        var bytes = [UInt8](repeating: 0, count: size)
        func put32(_ value: Int, at offset: Int) {
            for index in 0..<4 { bytes[offset + index] = UInt8((value >> (8 * index)) & 0xFF) }
        }
        bytes[0] = UInt8(ascii: "B")
        bytes[1] = UInt8(ascii: "M")
        put32(size, at: 2)
        put32(54, at: 10)
        put32(40, at: 14)
        put32(side, at: 18)
        put32(side, at: 22)
        bytes[26] = 1
        bytes[28] = 24
        put32(row * side, at: 34)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for y in 0..<side {
            for x in 0..<(side * 3) {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                bytes[54 + y * row + x] = UInt8(truncatingIfNeeded: state)
            }
        }
        return bytes
    }

    /// One request's end, as `burst.py` reports it.
    struct Result: Decodable {
        let status: Int
        let bytes: Int
        let complete: Bool
        let sha256: String?
        let seconds: Double?
        let error: String?
    }

    /// `count` requests at once on `node`, cycling through `paths`; `rate` bytes per second
    /// each (0: as fast as they come) for at most `hold` seconds; `ready` is written once every
    /// request (or `readyAfter` of them) has its answer's head.
    static func burst(
        _ node: ServeProcess, _ paths: [String], count: Int, rate: Int = 0, hold: Double = 0, timeout: Double = 60,
        ready: String? = nil, readyAfter: Int? = nil
    ) async throws -> [Result] {
        let output = TemporaryDirectory()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            [
                "python3", TestObjectStore.repository + "/Tests/burst/burst.py", "--port", String(node.port),
                "--count", String(count), "--rate", String(rate), "--hold", String(hold), "--timeout", String(timeout),
            ] + paths.flatMap { ["--path", $0] } + (ready.map { ["--ready-file", $0] } ?? [])
        if let readyAfter { process.arguments! += ["--ready-after", String(readyAfter)] }
        _ = FileManager.default.createFile(atPath: output.file("out.json"), contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output.file("out.json")))
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            process.terminationHandler = { _ in done.resume() }
            do { try process.run() } catch { done.resume(throwing: error) }
        }
        #expect(process.terminationStatus == 0)
        struct Report: Decodable { let results: [Result] }
        let data = try Data(contentsOf: URL(fileURLWithPath: output.file("out.json")))
        return try JSONDecoder().decode(Report.self, from: data).results
    }

    /// The peak resident memory of process `pid` so far (`VmHWM`), in MB.
    static func peakMB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
    }

    /// Statuses and errors of `results`, for messages.
    static func summary(_ results: [Result]) -> String {
        var counts: [String: Int] = [:]
        for result in results {
            let key = "\(result.status)\(result.complete ? "" : " cut")\(result.error.map { " \($0)" } ?? "")"
            counts[key, default: 0] += 1
        }
        return counts.sorted { $0.value > $1.value }.map { "\($0.value)× \($0.key)" }.joined(separator: ", ")
    }

    /// A request to `node` answered at once: the node is not wedged.
    static func expectAnswersAtOnce(_ node: ServeProcess, _ path: String, hash: String) async throws {
        let started = ContinuousClock.now
        let (response, data) = try await ServeProcess.request(node.url(path))
        #expect(response.statusCode == 200)
        #expect(FleetTests.hex(data) == hash)
        #expect(ContinuousClock.now - started < (underSanitizer ? .seconds(5) : .seconds(1)))
    }

    @Test(arguments: [
        (false, []), (false, ["--media-memory", "0", "--media-wait", "60s"]), (true, []),
        (true, ["--media-memory", "0"]),
    ])
    func everyRequestOfABurstIsAnsweredWithTheSameBytes(localStore: Bool, settings: [String]) async throws {
        // As shipped, the node reads a file this small into memory once for the whole burst;
        // with --media-memory 0, every answer is its own transfer from the store (or read from disk).
        let setup = try await Self.setup(side: 1750, settings, localStore: localStore)
        for path in ["/media/\(setup.name)", setup.mediaURL] {
            let results = try await Self.burst(setup.node, [path], count: Self.burstSize)
            let whole = results.filter { $0.status == 200 && $0.complete && $0.sha256 == setup.hash }
            #expect(whole.count == Self.burstSize, "\(path) \(settings): \(Self.summary(results))")
            try await Self.expectAnswersAtOnce(setup.node, path, hash: setup.hash)
        }
        // Bounded: as shipped, one copy of the file in memory; streamed, per answer a window of
        // the transfer and of the socket's writes (about 200 KB).
        let peak = Self.peakMB(setup.node.process.processIdentifier)
        print(
            "burst of \(Self.burstSize) × 2 MB, \(localStore ? "local store" : "object store"), "
                + "\(settings.isEmpty ? "as shipped" : settings.joined(separator: " ")): peak RSS \(peak) MB")
        #expect(peak < (underSanitizer ? 2000 : 300))
        #expect(setup.node.stop() == 0)
    }

    @Test func aStoreStoppedHalfWayEndsEveryRequestAndTheNodeServesAgainWhenItIsBack() async throws {
        let setup = try await Self.setup(side: 1750, ["--media-memory", "0", "--media-wait", "3s"])
        // A second node on the same bucket whose --base-url is its own: no redirect to offer.
        let plain = try ServeProcess(
            arguments: [
                "--store", "s3://\(setup.bucket)/media", "--s3-endpoint", TestObjectStore.endpoint, "--work-dir",
                setup.work.path, "--media-wait", "3s",
            ],
            environment: TestObjectStore.environment)
        let path = "/media/\(setup.name)"
        let started = ContinuousClock.now
        // Clients reading at 1 MB/s: the store stops once a twentieth of them have their answers'
        // heads, with transfers in flight and the other requests still waiting.
        let ready = setup.work.file("ready")
        async let ended = Self.burst(
            setup.node, [path], count: Self.burstSize, rate: 1_000_000, timeout: 45, ready: ready,
            readyAfter: Self.burstSize / 20)
        let readied = try await eventually(within: .seconds(30)) { FileManager.default.fileExists(atPath: ready) }
        #expect(readied, "the first requests did not get their answers' heads")
        let stopping = ContinuousClock.now
        try TestObjectStore.stop()
        let stopped = ContinuousClock.now
        let results = try await ended
        let burstEnded = ContinuousClock.now
        // Every request ended: whole, cut short by the store (its connection closed before
        // Content-Length), or, once the store was gone, a redirect to the bucket. None hung.
        #expect(results.allSatisfy { $0.error != "timeout" }, "\(Self.summary(results))")
        #expect(results.allSatisfy { [200, 307].contains($0.status) }, "\(Self.summary(results))")
        #expect(results.filter { $0.status == 200 && $0.complete }.allSatisfy { $0.sha256 == setup.hash })
        #expect(burstEnded - stopped < .seconds(underSanitizer ? 30 : 15), "\(Self.summary(results))")
        print(
            "store stopping \(stopping - started) into the burst, stopped \(stopped - stopping) later: "
                + "\(Self.summary(results))")

        let (refused, _) = try await ServeProcess.request(plain.url(path))
        #expect(refused.statusCode == 503 && refused.value(forHTTPHeaderField: "Retry-After") == "1")
        try TestObjectStore.start()
        var back = false
        let giveUp = ContinuousClock.now + .seconds(30)
        while !back, ContinuousClock.now < giveUp {
            back = (try? await ServeProcess.request(setup.node.url(path)))?.0.statusCode == 200
            if !back { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(back, "the node did not serve again once the store was back")
        try await Self.expectAnswersAtOnce(setup.node, path, hash: setup.hash)
        #expect(setup.node.stop() == 0 && plain.stop() == 0)
    }

    @Test func slowClientsDoNotHoldFastOnes() async throws {
        // 8 MB: more than a socket's send buffer takes, so each slow client holds a paused
        // transfer from the store, as shipped (a file this large is not kept in memory).
        let setup = try await Self.setup(side: 3600)
        let path = "/media/\(setup.name)"
        let fastCount = 20
        let alone = try await Self.burst(setup.node, [path], count: fastCount)
        let baseline = alone.compactMap(\.seconds).max() ?? 0
        #expect(
            alone.allSatisfy { $0.status == 200 && $0.complete && $0.sha256 == setup.hash }, "\(Self.summary(alone))")

        let slowCount = underSanitizer ? 50 : 200
        let ready = setup.work.file("slow-ready")
        async let slow = Self.burst(
            setup.node, [path], count: slowCount, rate: 10_000, hold: underSanitizer ? 40 : 20, timeout: 60,
            ready: ready)
        let readied = try await eventually(within: .seconds(30)) { FileManager.default.fileExists(atPath: ready) }
        #expect(readied, "the slow clients did not all get their answers' heads")
        let beside = try await Self.burst(setup.node, [path], count: fastCount)
        let slowest = beside.compactMap(\.seconds).max() ?? 0
        #expect(
            beside.allSatisfy { $0.status == 200 && $0.complete && $0.sha256 == setup.hash }, "\(Self.summary(beside))")
        #expect(
            slowest <= 2 * baseline + 2, "fast clients took up to \(slowest) s beside slow ones, \(baseline) s alone")
        // Each slow client read at 10 KB/s until it gave up, or (when the store, busy starting
        // them all, did not answer within --media-wait) was sent to the bucket.
        let held = try await slow
        #expect(
            held.allSatisfy { ($0.status == 200 && $0.error == "held") || $0.status == 307 }, "\(Self.summary(held))")
        print(
            "\(fastCount) fast clients: slowest \(baseline) s alone, \(slowest) s beside \(slowCount) slow ones "
                + "(\(Self.summary(held)))")
        try await Self.expectAnswersAtOnce(setup.node, path, hash: setup.hash)
        #expect(setup.node.stop() == 0)
    }

    @Test func sigtermDuringABurstExitsWithinTheDrainLimit() async throws {
        // A 2 MB file streamed from the store (not kept in memory): the clients, reading 50 KB/s,
        // are all mid-transfer when the signal comes.
        let setup = try await Self.setup(side: 1750, ["--drain-limit", "3s", "--media-memory", "0"])
        let ready = setup.work.file("ready")
        async let burst = Self.burst(
            setup.node, ["/media/\(setup.name)"], count: Self.burstSize, rate: 50_000, hold: 60, timeout: 90,
            ready: ready)
        let readied = try await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: ready) }
        #expect(readied)
        let signalled = ContinuousClock.now
        kill(setup.node.process.processIdentifier, SIGTERM)
        while setup.node.process.isRunning, ContinuousClock.now - signalled < .seconds(30) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let took = ContinuousClock.now - signalled
        #expect(!setup.node.process.isRunning)
        #expect(took < .seconds(underSanitizer ? 8 : 5), "took \(took) to exit with a 3 s drain limit")
        #expect(setup.node.stop() == 0)
        let results = try await burst
        #expect(results.allSatisfy { $0.error != "timeout" }, "\(Self.summary(results))")
        print("SIGTERM during a burst of \(Self.burstSize): exit after \(took); \(Self.summary(results))")
    }
}
