import Foundation

/// Why the server refuses to start.
public enum ServerError: Error, CustomStringConvertible {
    /// The media URL keys and salts do not pair up.
    case mediaURLKeys(String)
    /// `--fleet-worker` without `--fleet-db`.
    case fleetWorkerWithoutFleet
    /// The trace settings disagree with the `OTEL_*` variables the exporter reads.
    case tracing(String)

    public var description: String {
        switch self {
        case let .mediaURLKeys(why): why
        case let .tracing(why): why
        case .fleetWorkerWithoutFleet:
            "--fleet-worker works the fleet's batches: it needs the fleet's database, --fleet-db (or PUSHMEDIA_FLEET_DB)"
        }
    }
}
