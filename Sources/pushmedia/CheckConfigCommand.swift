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
            checks each setting with the same rules and messages as its flag, then the settings that \
            go together (--url-key with --url-salt, the relays' TLS files). Exit status: 0 valid, 65 \
            not (each problem is printed).
            """
    )

    @Argument(help: "The settings file.")
    var file: String

    func run() throws {
        let entries: Int
        do {
            let parsed = try SettingsFile.read(file)
            _ = try PushMediaConfig.fromSources(file: parsed, environment: [:])
            let server = try ServerConfig.fromSources(file: parsed, environment: [:])
            _ = try server.urls.signingKeys()
            if server.apns.port != nil { try server.apns.validate() }
            if server.fcm.port != nil { try server.fcm.validate() }
            entries = parsed.entries.count
        } catch {
            FileHandle.writeError("pushmedia: \(error)")
            throw Exit.dataError
        }
        print("\(file): \(entries) \(entries == 1 ? "setting" : "settings"), valid")
    }
}
