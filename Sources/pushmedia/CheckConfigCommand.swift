import ArgumentParser
import Foundation
import PushMedia
import PushMediaServer

struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check a settings file (--config): every name a setting's, every value one the setting takes.",
        discussion: """
            Reads FILE as `serve --config FILE` does (YAML, or JSON), then the PUSHMEDIA_* environment as \
            `serve` does (a Secret's token, say), and checks each setting with the same rules and \
            messages as its flag (a name that is no setting's gets the nearest one's), then every rule \
            `serve` checks before it opens a listener, with the same messages: the settings that go \
            together (--url-key with --url-salt, the relays' TLS files, --apns-key with its ID and team, \
            --fleet-worker with --fleet-db), the relays' credentials file, and who may reach each \
            listener (a public address needs auth). Every problem is printed, one a line. Exit status: \
            0 valid, 65 not.
            """
    )

    @Argument(help: "The settings file.")
    var file: String

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let entries: Int
        do {
            let parsed = try SettingsFile.readAll(file)
            // Each setting on its own, so that every value refused is told in one run.
            var config = PushMediaConfig()
            var server = ServerConfig()
            var problems = parsed.problems
            for (name, text) in parsed.entries {
                do throws(ConfigError) {
                    if PushMediaConfig.setting(named: name) != nil {
                        try config.set(name, to: text)
                    } else {
                        try server.set(name, to: text)
                    }
                } catch {
                    problems.append(.inFile(path: file, error))
                }
            }
            do throws(ConfigError) {
                config = try PushMediaConfig.fromEnvironment(environment, over: config)
                server = try ServerConfig.fromEnvironment(environment, over: server)
            } catch {
                problems.append(error)
            }
            if problems.count == 1 { throw problems[0] }
            if !problems.isEmpty { throw ConfigError.several(problems) }
            let checks = try StartChecks(config: config, server: server, environment: environment)
            for warning in checks.warnings { FileHandle.writeError("pushmedia: warning: \(warning.message)") }
            entries = parsed.entries.count
        } catch {
            for line in StartChecks.lines(of: error) { FileHandle.writeError("pushmedia: \(line)") }
            throw Exit.dataError
        }
        print("\(file): \(entries) \(entries == 1 ? "setting" : "settings"), valid")
    }
}
