import ArgumentParser
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
}

/// Exit codes (sysexits.h).
enum Exit {
    static let usage = ExitCode(64)
    static let dataError = ExitCode(65)
    static let ioError = ExitCode(74)
}
