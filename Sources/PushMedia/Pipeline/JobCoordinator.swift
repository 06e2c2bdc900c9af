/// The fleet's side of a shared job: of the nodes that need the same media at once, one makes
/// it (it holds the cache key's lease) and the others wait for its word, then read the store.
/// `Pipeline.coordinated` is its one caller; without a coordinator a job is shared per node.
public protocol JobCoordinator: Sendable {
    /// Asks for `key`'s lease. A waiter for the job's end is registered before asking, so that
    /// an end announced between the answer and the wait is not missed.
    func claim(_ key: String) async -> FleetClaim
    /// Ends the lease: records how the job ended (for nodes that ask later) and tells the nodes
    /// that wait.
    func finish(_ lease: FleetLease, _ end: FleetJobEnd) async
}

/// The answer to a claim.
public enum FleetClaim: Sendable {
    /// This node holds the lease (renewed until `finish`): it makes the media.
    case held(FleetLease)
    /// Another node holds it: wait for its word.
    case elsewhere(FleetWait)
    /// The job ended on another node a moment ago: read the store.
    case ended(FleetJobEnd)
    /// The coordination cannot be reached: the job is shared per node only.
    case unavailable
}

/// How a job ended, as nodes tell each other.
public enum FleetJobEnd: Sendable, Equatable {
    /// The store has the entry.
    case made
    /// The source cannot be made into an attachment (`reason` is a `ReasonCode`).
    case failed(reason: String, message: String)
    /// It ended without a result another node can use (its budget ran out, the store failed):
    /// the next claim may take the lease.
    case abandoned
}

/// A held lease, renewed in the background until it is finished.
public final class FleetLease: Sendable {
    public let key: String
    /// The fencing token: every claim that takes the key's lease gets a greater one, and a
    /// result is recorded only while the lease still has this one.
    public let epoch: Int64
    /// Stops the renewal; called once by `finish`.
    public let stopRenewing: @Sendable () -> Void
    /// Whether this node still holds the lease, asked just before the entry is recorded.
    public let confirm: @Sendable () async -> LeaseCheck

    public init(
        key: String, epoch: Int64 = 0, stopRenewing: @escaping @Sendable () -> Void,
        confirm: @escaping @Sendable () async -> LeaseCheck = { .unknown }
    ) {
        self.key = key
        self.epoch = epoch
        self.stopRenewing = stopRenewing
        self.confirm = confirm
    }
}

/// What a lease's holder learns when it asks whether it still holds the lease.
public enum LeaseCheck: Sendable, Equatable {
    /// It does: the entry may be recorded.
    case held
    /// It does not: the node was taken for dead (frozen, or cut off from the database) and
    /// another node holds the lease now. The job's result is dropped; the other node's counts.
    case lost
    /// The database did not answer: the fleet is down to one job per node, as when a claim
    /// cannot be made, and the entry is recorded (an entry is written whole, or not at all).
    case unknown
}

/// A registered wait for another node's job.
public struct FleetWait: Sendable {
    /// The job's end, or nil when `until` came first or the coordination was lost.
    public let end: @Sendable (_ until: ContinuousClock.Instant) async -> FleetJobEnd?

    public init(end: @escaping @Sendable (_ until: ContinuousClock.Instant) async -> FleetJobEnd?) {
        self.end = end
    }
}
