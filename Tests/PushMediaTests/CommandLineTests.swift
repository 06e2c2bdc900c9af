import Foundation
import Testing
@testable import PushMedia
import PushMediaTestSupport

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

    func pushmedia(_ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:]) async throws -> Run {
        try await Self.runner.run { try Self.launch(arguments, stdin: stdin, environment: environment) }
    }

    static func launch(_ arguments: [String], stdin: Data?, environment: [String: String]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pushmediaExecutable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHMEDIA_") }.merging(environment) { $1 }
        let out = Pipe(), err = Pipe(), input = Pipe()
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
        let run = try await pushmedia(["process", samplesDirectory + "/01-photo-exif.json", "--store", work.file("store"),
                                 "--base-url", "https://cdn.example.com/p", "--report", work.file("report.json")])
        #expect(run.status == 0, "\(run.stderr)")
        let payload = try #require(try JSONValue.parse(run.stdout).objectValue)
        let url = try #require(payload["media_url"]?.stringValue)
        #expect(url.hasPrefix("https://cdn.example.com/p/") && url.hasSuffix(".jpg"))
        #expect(payload["deep_link"] == .string("shop://deals/42"))
        #expect(run.stderr.contains("processed"))
        let report = try #require(try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("report.json")))).objectValue)
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
        #expect(String(decoding: run.stdout, as: UTF8.self) == #"{"aps":{"alert":"Hi","mutable-content":1},"n":1.0}"# + "\n")
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
        let environment = try await pushmedia(["process", samplesDirectory + "/17-no-media.json"], environment: ["PUSHMEDIA_ON_REJECT": "maybe", "PUSHMEDIA_STORE": work.path])
        #expect(environment.status == 64)
        #expect(environment.stderr.contains("PUSHMEDIA_ON_REJECT"))
        let missing = try await pushmedia(["process", work.file("nope.json"), "--store", work.path])
        #expect(missing.status == 74)
    }

    @Test func batchProcessesEverySampleAsDocumented() async throws {
        let work = TemporaryDirectory()
        let arguments = ["batch", samplesDirectory, "--out", work.file("out"), "--store", work.file("store"), "--concurrency", "3"]
        let run = try await pushmedia(arguments)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(String(decoding: run.stdout, as: UTF8.self).contains("21 payloads"))

        let expected: [String: (String, String?)] = [
            "01-photo-exif.json": ("processed", nil), "02-logo-alpha.json": ("passthrough", nil), "03-webp.json": ("processed", nil),
            "04-heic.json": ("processed", nil), "05-avif.json": ("processed", nil), "06-animated-gif.json": ("passthrough", nil),
            "07-tiff.json": ("processed", nil), "08-bmp.json": ("processed", nil), "09-no-extension.json": ("passthrough", nil),
            "10-png-named-jpg.json": ("passthrough", nil), "11-truncated.json": ("rejected", "decode_failed"),
            "12-mp3.json": ("passthrough", nil), "13-m4a.json": ("passthrough", nil), "14-wav.json": ("passthrough", nil),
            "15-mp4.json": ("passthrough", nil), "16-webm.json": ("rejected", "unsupported_type"), "17-no-media.json": ("skipped", "no_media"),
            "18-no-alert.json": ("skipped", "no_alert"), "19-near-limit.json": ("processed", nil), "20-invalid.json": ("rejected", "invalid_json"),
            "21-escape-attempt.json": ("rejected", "path_outside_root"),
        ]
        let report = try #require(try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("out/report.json")))).objectValue)
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
                let key = try #require(outcome["media_key"]?.stringValue)
                let name = try #require(payload[key]?.stringValue?.split(separator: "/").last.map(String.init))
                #expect(FileManager.default.fileExists(atPath: work.file("store/" + name)), "\(file)")
            }
        }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: work.file("out"))) ?? []).allSatisfy { !$0.hasSuffix(".tmp") })

        // A second run reuses the cache and leaves the outputs as they were.
        let first = try Data(contentsOf: URL(fileURLWithPath: work.file("out/03-webp.json")))
        let again = try await pushmedia(arguments)
        #expect(again.status == 0)
        let second = try #require(try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: work.file("out/report.json")))).objectValue)
        #expect(second["summary"]?.objectValue?["cache_hits"] == .number("15"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: work.file("out/03-webp.json"))) == first)
    }
}
