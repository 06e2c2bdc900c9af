import ArgumentParser
import Foundation
import PushMedia

@main
struct PushMediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushmedia",
        abstract: "Prepare rich push notification media on the server, before sending.",
        discussion: """
            Finds the media URL in a push payload, fetches it safely, sniffs its real type, makes it \
            an attachment iOS accepts (JPEG/PNG/GIF ≤ 10 MB, audio ≤ 5 MB, video ≤ 50 MB), stores it \
            under a stable URL with the right extension and rewrites the payload.
            """,
        version: PushMediaVersion.string,
        subcommands: [
            ProcessCommand.self, BatchCommand.self, ServeCommand.self, GCCommand.self, PurgeCommand.self,
            URLCommand.self, CheckConfigCommand.self, CheckCredentialsCommand.self, FleetDBCommand.self,
            WorkCommand.self, HealthCommand.self, ReloadCommand.self,
        ]
    )

    /// ArgumentParser's `main`, but for two answers: `pushmedia help NAME` for a NAME that is no
    /// command is a usage error (exit 64) naming the commands, where ArgumentParser prints the
    /// top-level help and exits 0; and an error a command's run throws comes with that command's
    /// usage, not the top level's.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.count >= 2, arguments[0] == "help", !arguments[1].hasPrefix("-") {
            let names = configuration.subcommands.map { $0._commandName }
            if !names.contains(arguments[1]) {
                FileHandle.writeError(
                    "pushmedia: help: there is no command \(arguments[1]); the commands are "
                        + names.joined(separator: ", "))
                Foundation.exit(Exit.usage.rawValue)
            }
        }
        var command: any ParsableCommand
        do { command = try parseAsRoot(arguments) } catch { exit(withError: error) }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ValidationError {
            // A command's own error (found as it runs) with its own usage.
            let command = type(of: command)
            FileHandle.writeError("Error: \(command.message(for: error))")
            FileHandle.writeError("Usage: pushmedia \(command.usageString())")
            FileHandle.writeError("  See 'pushmedia \(command._commandName) --help' for more information.")
            Foundation.exit(command.exitCode(for: error).rawValue)
        } catch {
            type(of: command).exit(withError: error)
        }
    }
}

/// Exit codes (sysexits.h).
enum Exit {
    static let usage = ExitCode(64)
    static let dataError = ExitCode(65)
    static let ioError = ExitCode(74)
}
