import ArgumentParser
import Foundation
import Logging
import PushMedia
import PushMediaFleet

struct FleetDBCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-db",
        abstract: "Create, migrate or check the fleet's tables in its PostgreSQL database (--fleet-db).",
        discussion: """
            `init` creates the tables (or migrates them to this version; running it again changes \
            nothing); `check` says whether they are there and of this version, as `serve` does at \
            start. Exit status: 0 done, 64 usage error or the tables missing or of another version, \
            74 the database cannot be reached.
            """
    )

    enum Action: String, ExpressibleByArgument, CaseIterable {
        case `init`, check
    }

    @Argument(help: "init or check.")
    var action: Action
    @OptionGroup var fleet: FleetOptions

    func run() async throws {
        // The fleet's settings only: their flags, then their PUSHMEDIA_* variables.
        var config: PushMediaConfig
        do {
            config = try PushMediaConfig.fromSources(file: nil, environment: ProcessInfo.processInfo.environment)
            try config.apply(fleet.given)
        } catch { throw ValidationError(error.description) }
        let logger = Logger(label: "pushmedia")
        do {
            guard let database = try FleetDatabase(config: config) else {
                throw ValidationError("give the database with --fleet-db (or PUSHMEDIA_FLEET_DB)")
            }
            switch action {
            case .`init`:
                let before = try await database.initialize(logger: logger)
                let version = FleetDatabase.schemaVersion
                print(
                    before == version
                        ? "the fleet's tables in \(database.described) are of version \(version): nothing to do"
                        : before.map {
                            "migrated the fleet's tables in \(database.described) from version \($0) to \(version)"
                        }
                            ?? "created the fleet's tables (version \(version)) in \(database.described)")
            case .check:
                try await database.check(logger: logger)
                print("the fleet's tables in \(database.described) are of version \(FleetDatabase.schemaVersion)")
            }
        } catch let error as FleetError {
            FileHandle.writeError("pushmedia: fleet-db: \(error)")
            throw error.isOutage ? Exit.ioError : Exit.usage
        }
    }
}
