import ArgumentParser
import Foundation
import PushMedia
import PushMediaServer

struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check a settings file (--config): every name a setting's, every value one the setting takes.",
        discussion: """
            Reads FILE as `--config FILE` does (YAML, or JSON), without the environment or flags, and \
            checks each setting with the same rules and messages as its flag, then every rule `serve` \
            checks before it opens a listener, with the same messages: the settings that go together \
            (--url-key with --url-salt, the relays' TLS files, --apns-key with its ID and team, \
            --fleet-worker with --fleet-db), the relays' credentials file, and who may reach each \
            listener (a public address needs auth). Exit status: 0 valid, 65 not (each problem is printed).
            """
    )

    @Argument(help: "The settings file.")
    var file: String

    func run() throws {
        let entries: Int
        do {
            let parsed = try SettingsFile.read(file)
            let config = try PushMediaConfig.fromSources(file: parsed, environment: [:])
            let server = try ServerConfig.fromSources(file: parsed, environment: [:])
            let checks = try StartChecks(
                config: config, server: server, environment: ProcessInfo.processInfo.environment)
            for warning in checks.warnings { FileHandle.writeError("pushmedia: warning: \(warning.message)") }
            entries = parsed.entries.count
        } catch {
            for line in StartChecks.lines(of: error) { FileHandle.writeError("pushmedia: \(line)") }
            throw Exit.dataError
        }
        print("\(file): \(entries) \(entries == 1 ? "setting" : "settings"), valid")
    }
}
