import CoreMetrics

/// The fleet's counters, on the server's registry.
struct FleetMetrics: Sendable {
    let factory: any MetricsFactory
    let unavailable: CoreMetrics.Counter
    let roundTrip: CoreMetrics.Timer
    /// Leases taken over from a holder that did not end them (it died, froze, or let them lapse).
    let handovers: CoreMetrics.Counter
    /// How long a claim waited for another node's job (its word, its holder's end, or a lapse).
    let leaseWait: CoreMetrics.Timer
    /// Results not recorded because their lease was taken over meanwhile (the fencing check).
    let fenced: CoreMetrics.Counter
    /// Holders' lives seen ending by this node's watches.
    let lifeEnded: CoreMetrics.Counter

    init(factory: any MetricsFactory) {
        self.factory = factory
        unavailable = CoreMetrics.Counter(label: "pushmedia_fleet_unavailable_total", factory: factory)
        roundTrip = CoreMetrics.Timer(label: "pushmedia_fleet_db_seconds", factory: factory)
        handovers = CoreMetrics.Counter(label: "pushmedia_fleet_lease_handovers_total", factory: factory)
        leaseWait = CoreMetrics.Timer(label: "pushmedia_fleet_lease_wait_seconds", factory: factory)
        fenced = CoreMetrics.Counter(label: "pushmedia_fleet_fenced_total", factory: factory)
        lifeEnded = CoreMetrics.Counter(label: "pushmedia_fleet_holders_ended_total", factory: factory)
    }

    /// A claim's result: `taken`, `expired` (taken over from a holder that stopped renewing),
    /// `waited` (another node runs it) or `ended` (another node has just made it).
    func lease(_ result: String) {
        CoreMetrics.Counter(label: "pushmedia_fleet_leases_total", dimensions: [("result", result)], factory: factory)
            .increment()
    }

    /// The fleet batches' items waiting for a worker and being worked on.
    func queue(queued: Int, working: Int) {
        for (state, count) in [("queued", queued), ("working", working)] {
            CoreMetrics.Gauge(label: "pushmedia_fleet_queue_items", dimensions: [("state", state)], factory: factory)
                .record(count)
        }
    }

    /// A notification heard: `end` or `purge`.
    func notification(_ kind: String) {
        CoreMetrics.Counter(
            label: "pushmedia_fleet_notifications_total", dimensions: [("kind", kind)], factory: factory
        ).increment()
    }
}
