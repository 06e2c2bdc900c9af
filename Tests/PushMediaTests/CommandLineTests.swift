import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

/// Runs the built `pushmedia` executable, as a user would.
@Suite("Command line")
struct CommandLineTests {
    struct Run {
        var status: Int32
        var stdout: Data
        var stderr: String
    }

    /// Waiting for a child process blocks, so it happens on a dedicated thread, not on the
    /// cooperative pool that the other tests' deadlines depend on.
    static let runner = BlockingExecutor(name: "test-cli", maxThreads: 4)

    /// Runs `pushmedia` with `arguments`; `wrapper` (e.g. `["/usr/bin/prlimit", "--fsize=…"]`)
    /// is a command that runs it.
    func pushmedia(
        _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:], wrapper: [String] = []
    ) async throws -> Run {
        try await Self.runner.run {
            try Self.launch(arguments, stdin: stdin, environment: environment, wrapper: wrapper)
        }
    }

    static func launch(_ arguments: [String], stdin: Data?, environment: [String: String], wrapper: [String] = [])
        throws -> Run
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: wrapper.first ?? pushmediaExecutable)
        process.arguments = wrapper.isEmpty ? arguments : Array(wrapper.dropFirst()) + [pushmediaExecutable] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHMEDIA_") }.merging(
            environment
        ) { $1 }
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(stdin) }
        try input.fileHandleForWriting.close()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }

    @Test func processWritesThePayloadAndAReport() async throws {
        let work = TemporaryDirectory()
        let run = try await pushmedia([
            "process", samplesDirectory + "/01-photo-exif.json", "--store", work.file("store"),
            "--base-url", "https://cdn.example.com/p", "--report", work.file("report.json"),
        ])
        #expect(run.status == 0, "\(run.stderr)")
        let payload = try #require(try JSONValue.parse(run.stdout).objectValue)
        let url = try #require(payload["media_url"]?.stringValue)
        #expect(url.hasPrefix("https://cdn.example.com/p/") && url.hasSuffix(".jpg"))
        #expect(payload["deep_link"] == .string("shop://deals/42"))
        #expect(run.stderr.contains("processed"))
        let report = try #require(
            try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("report.json")))).objectValue)
        #expect(report["status"] == .string("processed"))
        #expect(report["media_key"] == .string("media_url"))
        #expect(report["attachment"]?.objectValue?["url"] == .string(url))
        #expect(report["timings_ms"]?.objectValue?["total"] != nil)
        #expect(report["payload_bytes"] == .number("\(run.stdout.count - 1)"))
    }

    @Test func processReadsStandardInput() async throws {
        let work = TemporaryDirectory()
        let input = Data(#"{"aps":{"alert":"Hi","mutable-content":1},"n":1.0}"#.utf8)
        let run = try await pushmedia(["process", "-", "--store", work.path], stdin: input)
        #expect(run.status == 0)
        #expect(
            String(decoding: run.stdout, as: UTF8.self) == #"{"aps":{"alert":"Hi","mutable-content":1},"n":1.0}"# + "\n"
        )
        #expect(run.stderr.contains("skipped"))
    }

    @Test func exitCodes() async throws {
        let work = TemporaryDirectory()
        let invalid = try await pushmedia(["process", samplesDirectory + "/20-invalid.json", "--store", work.path])
        #expect(invalid.status == 65)
        #expect(invalid.stderr.contains("20-invalid.json") && invalid.stderr.contains("line 6"))
        #expect(invalid.stdout.isEmpty)
        let usage = try await pushmedia(["process", "--budget", "whenever", "--store", work.path])
        #expect(usage.status == 64)
        #expect(usage.stderr.contains("--budget"))
        let environment = try await pushmedia(
            ["process", samplesDirectory + "/17-no-media.json"],
            environment: ["PUSHMEDIA_ON_REJECT": "maybe", "PUSHMEDIA_STORE": work.path])
        #expect(environment.status == 64)
        #expect(environment.stderr.contains("PUSHMEDIA_ON_REJECT"))
        let missing = try await pushmedia(["process", work.file("nope.json"), "--store", work.path])
        #expect(missing.status == 74)
    }

    @Test func aBatchOfALinkedFolderReadsWhereItPoints() async throws {
        let work = TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: work.file("samples"), withDestinationPath: samplesDirectory)
        let linked = try await pushmedia([
            "batch", work.file("samples"), "--out", work.file("out"), "--store", work.path,
        ])
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(String(decoding: linked.stdout, as: UTF8.self).contains("32 payloads"))

        try FileManager.default.createDirectory(atPath: work.file("empty"), withIntermediateDirectories: true)
        let empty = try await pushmedia(["batch", work.file("empty"), "--out", work.file("out2"), "--store", work.path])
        #expect(empty.status == 0)
        #expect(empty.stderr.contains("empty: no *.json payloads under it"), "\(empty.stderr)")
    }

    /// Standard input that cannot be read (a folder) is an I/O error in plain words, exit 74,
    /// never a crash.
    @Test func unreadableStandardInputIsAnIOError() async throws {
        let run = try await pushmedia(
            ["process"], wrapper: ["/bin/sh", "-c", "exec \"$0\" \"$@\" < /"])
        #expect(run.status == 74, "\(run.stderr)")
        #expect(run.stderr.contains("standard input: cannot read: Is a directory"), "\(run.stderr)")
        #expect(!run.stderr.contains("Fatal error"))
    }

    /// `help` with a name that is no command is a usage error naming the commands.
    @Test func helpForNoSuchCommandIsAUsageError() async throws {
        let run = try await pushmedia(["help", "nosuch"])
        #expect(run.status == 64, "\(run.stderr)")
        #expect(run.stderr.contains("there is no command nosuch; the commands are process, batch"), "\(run.stderr)")
        let known = try await pushmedia(["help", "purge"])
        #expect(known.status == 0, "\(known.stderr)")
    }

    /// A command's own error comes with its own usage, not the top level's.
    @Test func aCommandsErrorShowsItsOwnUsage() async throws {
        let run = try await pushmedia(["process", "--budget", "soon"])
        #expect(run.status == 64, "\(run.stderr)")
        #expect(run.stderr.contains("Usage: pushmedia process"), "\(run.stderr)")
        #expect(!run.stderr.contains("<subcommand>"), "\(run.stderr)")
    }

    /// A store path that cannot be made says which directory and why in plain words.
    @Test func aStorePathUnderAFileIsNamed() async throws {
        let work = TemporaryDirectory()
        FileManager.default.createFile(atPath: work.file("plain"), contents: Data("x".utf8))
        let run = try await pushmedia(
            ["process", "--store", work.file("plain") + "/media"], stdin: Data(#"{"aps":{"alert":"hi"}}"#.utf8))
        #expect(run.status == 74, "\(run.stderr)")
        #expect(run.stderr.contains("\(work.file("plain")) is a file, not a directory"), "\(run.stderr)")
        #expect(!run.stderr.contains("NSCocoaErrorDomain"), "\(run.stderr)")
    }

    /// `serve` on a port in use names the address and the flag, exit 74; `health` asks the port
    /// given with --port.
    @Test func servingOnAPortInUseNamesTheAddress() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(listener, address, length) == 0 && listen(listener, 1) == 0
                    && getsockname(listener, address, &length) == 0
            }
        }
        #expect(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let work = TemporaryDirectory()
        let run = try await pushmedia(["serve", "--port", "\(port)", "--store", work.file("store")])
        #expect(run.status == 74, "\(run.stderr)")
        #expect(
            run.stderr.contains("cannot listen on 127.0.0.1:\(port) (--host/--port): the address is in use"),
            "\(run.stderr)")
        // Nothing answers HTTP there: `health --port` asks that port, and says so.
        let health = try await pushmedia(["health", "--port", "\(port)", "--timeout", "1"])
        #expect(health.status == 1, "\(health.stderr)")
        #expect(health.stderr.contains("127.0.0.1:\(port)/healthz"), "\(health.stderr)")
    }

    @Test func batchProcessesEverySampleAsDocumented() async throws {
        let work = TemporaryDirectory()
        let arguments = [
            "batch", samplesDirectory, "--out", work.file("out"), "--store", work.file("store"), "--concurrency", "3",
        ]
        let run = try await pushmedia(arguments)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(String(decoding: run.stdout, as: UTF8.self).contains("32 payloads"))

        let expected: [String: (String, String?)] = [
            "01-photo-exif.json": ("processed", nil), "02-logo-alpha.json": ("passthrough", nil),
            "03-webp.json": ("processed", nil),
            "04-heic.json": ("processed", nil), "05-avif.json": ("processed", nil),
            "06-animated-gif.json": ("passthrough", nil),
            "07-tiff.json": ("processed", nil), "08-bmp.json": ("processed", nil),
            "09-no-extension.json": ("passthrough", nil),
            "10-png-named-jpg.json": ("passthrough", nil), "11-truncated.json": ("rejected", "decode_failed"),
            "12-mp3.json": ("passthrough", nil), "13-m4a.json": ("passthrough", nil),
            "14-wav.json": ("passthrough", nil),
            "15-mp4.json": ("passthrough", nil), "16-webm.json": ("processed", nil),
            "17-no-media.json": ("skipped", "no_media"),
            "18-no-alert.json": ("skipped", "no_alert"), "19-near-limit.json": ("processed", nil),
            "20-invalid.json": ("rejected", "invalid_json"),
            "21-escape-attempt.json": ("rejected", "path_outside_root"),
            "22-fcm-message.json": ("processed", nil), "23-fcm-webpush.json": ("processed", nil),
            "24-fcm-apns.json": ("processed", nil),
            "25-onesignal.json": ("processed", nil), "26-airship.json": ("processed", nil),
            "27-braze.json": ("passthrough", nil),
            "28-clevertap.json": ("passthrough", nil), "29-iterable.json": ("processed", nil),
            "30-customerio.json": ("processed", nil), "31-clevertap-carousel.json": ("processed", nil),
            "32-braze-story.json": ("processed", nil),
        ]
        let report = try #require(
            try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("out/report.json")))).objectValue)
        let items = try #require(report["items"]?.arrayValue)
        #expect(items.count == expected.count)
        for item in items.compactMap(\.objectValue) {
            let file = try #require(item["file"]?.stringValue)
            let outcome = try #require(item["outcome"]?.objectValue)
            let (status, reason) = try #require(expected[file])
            #expect(outcome["status"] == .string(status), "\(file)")
            if let reason { #expect(outcome["reason"] == .string(reason), "\(file)") }
            guard file != "20-invalid.json" else {
                #expect(!FileManager.default.fileExists(atPath: work.file("out/" + file)))
                continue
            }
            // Every rewritten payload exists, fits APNs, and points at a file in the store.
            let written = try Data(contentsOf: URL(fileURLWithPath: work.file("out/" + file)))
            #expect(written.count - 1 <= 4096)
            let payload = try #require(try JSONValue.parse(written).objectValue)
            if status == "processed" || status == "passthrough" {
                // Every attachment of every media reference is in the payload and in the store.
                let media = (outcome["media"]?.arrayValue ?? []).compactMap { $0.objectValue }
                #expect(!media.isEmpty)
                let text = String(decoding: JSONValue.object(payload).serialized(), as: UTF8.self)
                for entry in media {
                    let url = try #require(entry["attachment"]?.objectValue?["url"]?.stringValue, "\(file)")
                    #expect(
                        text.contains("\"" + url.replacingOccurrences(of: "/", with: "\\/") + "\"")
                            || text.contains("\"" + url + "\""), "\(file)")
                    let name = try #require(url.split(separator: "/").last.map(String.init))
                    #expect(FileManager.default.fileExists(atPath: work.file("store/" + name)), "\(file)")
                }
            }
        }
        #expect(
            ((try? FileManager.default.contentsOfDirectory(atPath: work.file("out"))) ?? []).allSatisfy {
                !$0.hasSuffix(".tmp")
            })

        // A second run reuses the cache and leaves the outputs as they were.
        let first = try Data(contentsOf: URL(fileURLWithPath: work.file("out/03-webp.json")))
        let again = try await pushmedia(arguments)
        #expect(again.status == 0)
        let second = try #require(
            try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("out/report.json")))).objectValue)
        #expect(second["summary"]?.objectValue?["cache_hits"] == .number("27"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: work.file("out/03-webp.json"))) == first)
    }

    /// Runs `pushmedia` to completion and returns its exit status and peak RSS in KiB. GNU time
    /// forks it and reports its peak: a child spawned straight from this process (vfork, or fork)
    /// would start from this process's own high-water mark, which `wait4` then reports as the child's.
    static func measure(_ arguments: [String]) throws -> (Int32, Int) {
        let report = TemporaryDirectory()
        var pid: pid_t = 0
        let argv =
            (["/usr/bin/time", "-f", "%M", "-o", report.file("rss"), pushmediaExecutable] + arguments).map {
                strdup($0)
            } + [nil]
        defer { for argument in argv { free(argument) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let spawned = posix_spawn(&pid, "/usr/bin/time", &actions, nil, argv, environ)
        guard spawned == 0 else { throw CocoaError(.executableLoad) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // The last line is the peak; a line before it says the command ended by a signal.
        let text = try String(contentsOfFile: report.file("rss"), encoding: .utf8)
        guard let peak = text.split(separator: "\n").last.flatMap({ Int($0) }) else {
            throw CocoaError(.fileReadCorruptFile)
        }
        return ((status >> 8) & 0xFF, peak)
    }

    /// Writes `count` payloads whose media are distinct URLs on `origin`.
    static func writePayloads(_ count: Int, in directory: String, url: (Int) -> String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for index in 0..<count {
            let text =
                #"{"aps":{"alert":{"title":"Item \#(index)","body":"Deal"},"mutable-content":1},"media_url":"\#(url(index))"}"#
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + String(format: "/p%03d.json", index)))
        }
    }

    /// Every rewritten payload under `out` is whole JSON and points at a file in the store. Right
    /// after a kill, a hidden temporary file (`.<name>.<id>.tmp`, never read as output, removed by
    /// the next run) may remain from a write cut short: `allowTemporaries`.
    static func checkOutputs(_ out: String, store: String, allowTemporaries: Bool = false) throws -> Int {
        var checked = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? [] {
            if allowTemporaries && name.hasPrefix(".") && name.hasSuffix(".tmp") { continue }
            #expect(!name.hasSuffix(".tmp"), "partial output \(name)")
            guard name.hasPrefix("p"), name.hasSuffix(".json") else { continue }
            let payload = try #require(
                try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: out + "/" + name))).objectValue, "\(name)")
            if let url = payload["media_url"]?.stringValue, url.contains("/media/") {
                #expect(
                    FileManager.default.fileExists(atPath: store + "/" + url.split(separator: "/").last!),
                    "\(name) → \(url)")
            }
            checked += 1
        }
        return checked
    }

    @Test func aBatchKilledMidwayLeavesNothingPartialAndRerunsToCompletion() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/slow.webp", .delayed(.milliseconds(250), body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let work = TemporaryDirectory()
        try Self.writePayloads(40, in: work.file("in")) { origin.url("/slow.webp?v=\($0)") }
        // Two payloads at a time (no prefetch): at least 5 s of downloads, killed part way.
        let arguments = [
            "batch", work.file("in"), "--out", work.file("out"), "--store", work.file("store"),
            "--allow-private-networks", "--concurrency", "2", "--prefetch", "0",
        ]

        let victim = Process()
        victim.executableURL = URL(fileURLWithPath: pushmediaExecutable)
        victim.arguments = arguments
        victim.standardOutput = FileHandle.nullDevice
        victim.standardError = FileHandle.nullDevice
        try victim.run()
        // Killed once a few payloads are written, while others are being downloaded and written.
        func written() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: work.file("out"))) ?? []).filter {
                $0.hasPrefix("p") && $0.hasSuffix(".json")
            }.count
        }
        for _ in 0..<2000 where written() < 3 { try await Task.sleep(for: .milliseconds(5)) }
        kill(victim.processIdentifier, SIGKILL)
        await Self.runner.run { victim.waitUntilExit() }
        #expect(victim.terminationReason == .uncaughtSignal)
        let before = try Self.checkOutputs(work.file("out"), store: work.file("store"), allowTemporaries: true)
        #expect(before >= 3, "killed before any payload was written: the check after it checks nothing")
        #expect(before < 40, "the batch finished before it was killed")

        let rerun = try await pushmedia(arguments)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(try Self.checkOutputs(work.file("out"), store: work.file("store")) == 40)
        let incoming = work.file("store/.incoming")
        let partial = (FileManager.default.subpaths(atPath: incoming) ?? []).filter { $0.hasSuffix(".part") }
        #expect(partial.isEmpty, "\(partial)")
        let report = try #require(
            try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("out/report.json")))).objectValue)
        #expect(report["summary"]?.objectValue?["by_status"]?.objectValue?["processed"] == .number("40"))
    }

    /// The disk fills up during the download (a file size limit stands in for a full disk): the
    /// payload keeps its original URL as the best attempt, the text goes out, and no partial
    /// file stays behind. (The limit is 4 MB and the source 12 MB: a ThreadSanitizer build dies of
    /// SIGBUS under a limit of 100 kB before it runs at all.)
    @Test func aFullDiskKeepsTheOriginalURL() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/photo.jpg",
            .file(
                body: HostileFixtures.padded(try sampleMedia("photo-exif.jpg"), to: 12_000_000),
                contentType: "image/jpeg"))
        let work = TemporaryDirectory()
        let url = origin.url("/photo.jpg")
        let payload =
            #"{"aps":{"alert":{"title":"Sale","body":"Today only"},"mutable-content":1},"media_url":"\#(url)"}"#
        let store = work.file("store")
        let run = try await pushmedia(
            ["process", "-", "--store", store, "--allow-private-networks"], stdin: Data(payload.utf8),
            wrapper: ["/usr/bin/prlimit", "--fsize=4000000"])
        #expect(run.status == 0, "\(run.stderr)")
        let out = try #require(try JSONValue.parse(run.stdout).objectValue)
        #expect(out["media_url"] == .string(url), "the original URL is kept")
        #expect(out["aps"]?.objectValue?["alert"]?.objectValue?["body"] == .string("Today only"))
        // Nothing was learnt about the media: the payload goes out as it came.
        #expect(out == (try JSONValue.parse(Data(payload.utf8)).objectValue))
        #expect(
            run.stderr.contains("best_attempt (store_unavailable)") && run.stderr.contains("local disk"),
            "\(run.stderr)")
        let partial = (FileManager.default.subpaths(atPath: store + "/.incoming") ?? []).filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: store + "/.incoming/" + path, isDirectory: &isDirectory)
                && !isDirectory.boolValue
        }
        #expect(partial.isEmpty, "partial files: \(partial)")

        // With room on the disk the same payload is processed.
        let again = try await pushmedia(
            ["process", "-", "--store", store, "--allow-private-networks"], stdin: Data(payload.utf8))
        #expect(
            try JSONValue.parse(again.stdout).objectValue?["pushmedia"]?.objectValue?["status"] == .string("processed"))
    }

    /// A store file cut short behind PushMedia's back: `gc --verify` finds and removes it, and
    /// the next job for the same media makes it again.
    @Test func gcVerifyRemovesAFileThatNoLongerMatchesItsName() async throws {
        let work = TemporaryDirectory()
        let store = work.file("store")
        try FileManager.default.createDirectory(atPath: work.file("media"), withIntermediateDirectories: true)
        try Data(try sampleMedia("photo-exif.jpg")).write(to: URL(fileURLWithPath: work.file("media/photo.jpg")))
        let payload = #"{"aps":{"alert":"Sale","mutable-content":1},"media_url":"media/photo.jpg"}"#
        try Data(payload.utf8).write(to: URL(fileURLWithPath: work.file("p.json")))
        let first = try await pushmedia(["process", work.file("p.json"), "--store", store])
        let url = try #require(try JSONValue.parse(first.stdout).objectValue?["media_url"]?.stringValue)
        let name = String(url.split(separator: "/").last!)
        let files = try FileManager.default.contentsOfDirectory(atPath: store).filter { MediaStore.isValidName($0) }
        #expect(files.count == 2, "the attachment and its thumbnail: \(files)")
        #expect(truncate(store + "/" + name, 1000) == 0)

        let dry = try await pushmedia(["gc", "--store", store, "--verify", "--dry-run", "--json"])
        let report = try #require(try JSONValue.parse(dry.stdout).objectValue?["verify"]?.objectValue, "\(dry.stderr)")
        #expect(
            report["checked"] == .number("2") && report["corrupt"] == .array([.string(name)])
                && report["removed"] == .number("0"))
        #expect(FileManager.default.fileExists(atPath: store + "/" + name))
        let real = try await pushmedia(["gc", "--store", store, "--verify", "--json"])
        #expect(real.status == 0 && real.stderr.contains("1 no longer match their name"), "\(real.stderr)")
        #expect(!FileManager.default.fileExists(atPath: store + "/" + name))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: store).filter { MediaStore.isValidName($0) }.count == 1)

        // The cache entry still names the file: the next job notices it is gone and makes it again.
        let again = try await pushmedia(["process", work.file("p.json"), "--store", store])
        #expect(try JSONValue.parse(again.stdout).objectValue?["media_url"]?.stringValue == url)
        let restored = try Data(contentsOf: URL(fileURLWithPath: store + "/" + name))
        #expect(try restored.count > 1000 && MediaStore.sha256(file: store + "/" + name) == String(name.prefix(64)))
    }

    @Test func aHostileBatchStaysWithinMemoryAndFinishes() async throws {
        let origin = try TestOrigin()
        origin.route(
            "/bomb.png",
            .file(body: HostileFixtures.pngClaiming(width: 30_000, height: 30_000), contentType: "image/png"))
        origin.route("/frames.gif", .file(body: HostileFixtures.gif(frames: 3_000), contentType: "image/gif"))
        origin.route(
            "/big.mp4",
            .file(body: HostileFixtures.padded(try sampleMedia("clip.mp4"), to: 45_000_000), contentType: "video/mp4"))
        origin.route("/photo.jpg", .file(body: try sampleMedia("photo-exif.jpg"), contentType: "image/jpeg"))
        origin.route("/endless", .endless(contentType: "image/jpeg"))
        let paths = ["/bomb.png", "/frames.gif", "/big.mp4", "/photo.jpg", "/endless"]
        let work = TemporaryDirectory()
        try Self.writePayloads(paths.count, in: work.file("in")) { origin.url(paths[$0]) }
        // Five jobs share the cores (one streams 200 MB): a budget none of them runs out of, for
        // the outcomes below depend on each job finishing.
        let (status, peakKB) = try await Self.runner.run {
            try Self.measure([
                "batch", work.file("in"), "--out", work.file("out"), "--store", work.file("store"),
                "--allow-private-networks", "--budget", "\(roomyBudget.components.seconds)s",
            ])
        }
        #expect(status == 0)
        let report = try #require(
            try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("out/report.json")))).objectValue)
        let reasons = report["items"]?.arrayValue?.map {
            $0.objectValue?["outcome"]?.objectValue?["reason"]?.stringValue ?? $0.objectValue?["outcome"]?.objectValue?[
                "status"]?.stringValue ?? "?"
        }
        #expect(reasons == ["too_many_pixels", "processed", "passthrough", "processed", "too_large"])
        // AddressSanitizer adds shadow memory and redzones: allow three times as much. Under
        // ThreadSanitizer the process's RSS is mostly its shadow (several times the memory used,
        // plus per-thread state) and says little about what the code holds: not checked there.
        switch ProcessInfo.processInfo.environment["PUSHMEDIA_TEST_SANITIZER"] {
        case nil: #expect(peakKB < 300 * 1024, "peak RSS \(peakKB / 1024) MB")
        case "address": #expect(peakKB < 900 * 1024, "peak RSS \(peakKB / 1024) MB under AddressSanitizer")
        default: break
        }
    }
}
