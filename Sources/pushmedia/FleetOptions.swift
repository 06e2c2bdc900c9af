import ArgumentParser
import PushMedia

/// The fleet's settings (`PushMediaConfig.fleet`): the commands that take part in a fleet
/// (`serve`, `purge`, `fleet-db`).
struct FleetOptions: ParsableArguments, SettingFlags {
    @Option(name: .customLong("fleet-db"), help: .setting("fleet-db"))
    var fleetDB: String?
    @Option(name: .customLong("fleet-db-password-file"), help: .setting("fleet-db-password-file"))
    var fleetDBPasswordFile: String?
    @Option(name: .customLong("fleet-lease"), help: .setting("fleet-lease"))
    var fleetLease: String?
    @Option(name: .customLong("fleet-db-timeout"), help: .setting("fleet-db-timeout"))
    var fleetDBTimeout: String?
    @Option(name: .customLong("fleet-node-timeout"), help: .setting("fleet-node-timeout"))
    var fleetNodeTimeout: String?
}
