import Foundation
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// The settings file (`--config`): YAML or JSON by the flags' names, under the environment and
/// the flags, checked with the flags' own rules.
@Suite("Settings file")
struct SettingsFileTests {
    @Test func valuesByTheFlagsNames() throws {
        let yaml = """
            # a node of the fleet
            store: /var/lib/pushmedia/store
            budget: 3s
            allow-private-networks: true
            max-jobs: 8
            token: [first-token-0123456789, second-token-0123456789]
            media-key: hero_image
            url-budget: 2.5s
            apns-port: 2197
            """
        let entries = try SettingsFile.parse(yaml, path: "pushmedia.yaml")
        let file = (path: "pushmedia.yaml", entries: entries)
        let config = try PushMediaConfig.fromSources(file: file, environment: [:])
        #expect(config.storeLocation == "/var/lib/pushmedia/store")
        #expect(config.budget == .seconds(3))
        #expect(config.allowPrivateNetworks)
        #expect(config.maxJobs == 8)
        #expect(config.extraMediaKeys == ["hero_image"])
        let server = try ServerConfig.fromSources(file: file, environment: [:])
        #expect(server.tokens == ["first-token-0123456789", "second-token-0123456789"])
        #expect(server.urls.budget == .milliseconds(2500))
        #expect(server.apns.port == 2197)
        // JSON is YAML too.
        let json = try SettingsFile.parse(#"{"budget": "4s", "token": ["a-token-0123456789"]}"#, path: "p.json")
        #expect(try PushMediaConfig.fromSources(file: ("p.json", json), environment: [:]).budget == .seconds(4))
    }

    /// Flags win over the environment, which wins over the file, which wins over the defaults.
    @Test func precedence() throws {
        let file = (path: "f.yaml", entries: try SettingsFile.parse("budget: 3s\njpeg-quality: 70\n", path: "f.yaml"))
        var config = try PushMediaConfig.fromSources(file: file, environment: ["PUSHMEDIA_BUDGET": "5s"])
        #expect(config.budget == .seconds(5))
        #expect(config.jpegQuality == 70)
        try config.apply([("budget", "7s")])
        #expect(config.budget == .seconds(7))
        #expect(try PushMediaConfig.fromSources(file: nil, environment: [:]).budget == PushMediaConfig().budget)
    }

    @Test func problemsNameTheFileAndTheSetting() throws {
        func problem(_ text: String) -> String {
            do {
                let entries = try SettingsFile.parse(text, path: "bad.yaml")
                _ = try PushMediaConfig.fromSources(file: ("bad.yaml", entries), environment: [:])
                _ = try ServerConfig.fromSources(file: ("bad.yaml", entries), environment: [:])
                return "accepted"
            } catch { return "\(error)" }
        }
        #expect(problem("budgt: 3s") == "bad.yaml: unknown setting --budgt (did you mean --budget?)")
        #expect(problem("budget: soon").hasPrefix("bad.yaml: invalid value \"soon\" for --budget: expected"))
        #expect(problem("port: 99999").hasPrefix("bad.yaml: invalid value \"99999\" for --port"))
        #expect(problem("budget: [1s, 2s]").contains("not repeatable"))
        #expect(problem("- budget").contains("must be a mapping"))
        #expect(problem("config: other.yaml").contains("cannot name another"))
        #expect(problem("budget: [").contains("not valid YAML"))
        // A secret's text is not repeated in the message.
        #expect(!problem("hmac-secret: short").contains("short"))
        #expect(problem("") == "accepted")
    }

    /// `pushmedia serve --config`: the address from the file, the environment, then a flag.
    @Test func serveReadsTheFileUnderTheEnvironmentAndFlags() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("pushmedia.yaml")
        try "host: 127.0.0.2\nstore: \(directory.file("store"))\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        for (arguments, environment, expected) in [
            (["--config", path], [String: String](), "127.0.0.2"),
            ([], ["PUSHMEDIA_CONFIG": path], "127.0.0.2"),
            (["--config", path], ["PUSHMEDIA_HOST": "127.0.0.3"], "127.0.0.3"),
            (["--config", path, "--host", "127.0.0.4"], ["PUSHMEDIA_HOST": "127.0.0.3"], "127.0.0.4"),
        ] {
            let server = try ServeProcess(arguments: arguments, environment: environment)
            #expect(server.output.contains("listening on http://\(expected):"), "\(arguments) \(environment)")
            #expect(server.stop() == 0)
        }
    }

    /// SIGHUP reads the file again: new tokens and media URL sources take effect at once; a
    /// setting that needs a restart is named; a broken file keeps what is in force. The first is
    /// sent by `pushmedia reload --pid`, which refuses a process that is not pushmedia.
    @Test func sighupReloadsWhatCanChange() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("pushmedia.yaml")
        func write(_ text: String) throws { try text.write(toFile: path, atomically: true, encoding: .utf8) }
        try write("token: [first-token-0123456789]\nstore: \(directory.file("store"))\n")
        let server = try ServeProcess(arguments: ["--config", path])
        defer { _ = server.stop() }
        func status(_ token: String) async throws -> Int {
            let (response, _) = try await ServeProcess.request(
                server.url("/v1/process"), method: "POST", body: "{}",
                headers: ["Authorization": "Bearer \(token)", "Content-Type": "application/json"])
            return response.statusCode
        }
        func mediaURLs() async throws -> Int {
            let (response, _) = try await ServeProcess.request(
                server.url("/insecure/pr:ios/plain/https://cdn.shop.example/x@jpg"), method: "HEAD")
            return response.statusCode
        }
        #expect(try await status("first-token-0123456789") == 200)
        #expect(try await status("second-token-0123456789") == 401)
        #expect(try await mediaURLs() == 404)
        /// SIGHUP (by `pushmedia reload` when `command`), then the wait for the reload's line in the
        /// log (reloaded or not).
        func hangUpAndWait(command: Bool = false) async throws {
            func reloads() -> Int {
                server.log.withLock { log in
                    ["settings reloaded", "settings not reloaded"].reduce(0) {
                        $0 + log.components(separatedBy: $1).count - 1
                    }
                }
            }
            let before = reloads()
            if command {
                let pid = server.process.processIdentifier
                let (status, output) = try Self.pushmedia(["reload", "--pid", "\(pid)"])
                #expect(status == 0 && output.contains("sent SIGHUP to pushmedia (process \(pid))"), "\(output)")
            } else {
                kill(server.process.processIdentifier, SIGHUP)
            }
            #expect(try await eventually { reloads() > before }, "no reload in the log")
        }
        try write(
            "token: [second-token-0123456789]\nstore: \(directory.file("store"))\nbudget: 3s\n"
                + "url-allow-source: https://127.0.0.9/\n")
        // A process that is not pushmedia (this test's) is not signalled.
        let (refused, why) = try Self.pushmedia(["reload", "--pid", "\(getpid())"])
        #expect(refused == 1 && why.contains("not pushmedia: give serve's process id with --pid"), "\(why)")
        #expect(try await status("second-token-0123456789") == 401, "reloaded by a refused reload")
        try await hangUpAndWait(command: true)
        #expect(try await status("first-token-0123456789") == 401)
        #expect(try await status("second-token-0123456789") == 200)
        #expect(try await mediaURLs() == 403, "media URLs on, this source outside the allow-list")
        try write("token: [\n")
        try await hangUpAndWait()
        #expect(try await status("second-token-0123456789") == 200, "a broken file keeps the tokens in force")
        #expect(server.stop() == 0)
        let log = server.finishedLog()
        #expect(log.contains("these settings change only with a restart") && log.contains("settings=budget"), "\(log)")
        #expect(log.contains("settings not reloaded, those in force kept"))
        #expect(!log.contains("second-token-0123456789"), "a token in the log")
    }

    /// Runs `pushmedia arguments` to its end: its exit status, and what it wrote to stdout and stderr.
    static func pushmedia(_ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pushmediaExecutable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
