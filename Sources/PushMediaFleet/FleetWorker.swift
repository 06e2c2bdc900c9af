import Foundation
import PushMedia
import Tracing

/// Works fleet batches' items with a pipeline, for `pushmedia work` and `serve --fleet-worker`:
/// takes them from the queue a few at a time under the node's name, renews their leases while it
/// works (the fleet's lease), processes each as `batch` does and records its result, each item in
/// a trace of its own when the fleet's sampler traces it. `concurrency` items are processed at
/// once and no more are taken; a slot that frees takes the next item at once (no round waits for
/// its slowest item).
public struct FleetWorker: Sendable {
    public let queue: FleetQueue
    /// The node it works for: items are held under its name, for its lease.
    public let fleet: Fleet
    public let pipeline: Pipeline
    public let concurrency: Int
    /// How many more times an item whose media another node was making is processed.
    static let fleetRetries = 3

    public init(queue: FleetQueue, fleet: Fleet, pipeline: Pipeline, concurrency: Int) {
        self.queue = queue
        self.fleet = fleet
        self.pipeline = pipeline
        self.concurrency = concurrency
    }

    /// What a worker did on a batch.
    public struct Tally: Sendable {
        /// Items whose results it recorded.
        public var recorded = 0
        /// Items it processed but did not record: their lease lapsed first (another worker
        /// records them) or the batch was deleted.
        public var lost = 0

        public init() {}

        public static func += (lhs: inout Tally, rhs: Tally) {
            lhs.recorded += rhs.recorded
            lhs.lost += rhs.lost
        }
    }

    /// Works the batch `name` until it has no item left to take (other workers may still hold
    /// some); local media paths resolve under `mediaRoot` (nil: none is read). `mayStart` is
    /// awaited before each item is started: a node that also answers requests puts them first
    /// there. An item whose work was cancelled (the process stopping) is not recorded: its lease
    /// lapses and another worker makes it. Throws when the database fails.
    public func work(
        batch name: String, mediaRoot: String?, mayStart: @escaping @Sendable () async -> Void = {}
    ) async throws -> Tally {
        let (queue, pipeline) = (self.queue, self.pipeline)
        let (holder, lease, sampler) = (fleet.node, fleet.lease, fleet.sampler)
        // Renews the lease of every item held here, every third of the lease.
        let renewal = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: lease / 3)
                try? await queue.renew(name: name, holder: holder, lease: lease)
            }
        }
        defer { renewal.cancel() }
        // Each item in its span (a trace of its own: the batch was sent long before), with its
        // batch, number and outcome; the pipeline's spans under it.
        let process: @Sendable (FleetQueue.Item) async throws -> Bool = { item in
            let span = sampler?.start("pushmedia.fleet.item", ofKind: .consumer)
            defer { span?.end() }
            return try await ServiceContext.$current.withValue(span.map(PipelineTrace.context(of:))) {
                span?.setAttribute("pushmedia.batch", name)
                span?.setAttribute("pushmedia.batch.item", item.number)
                let context = PayloadContext(mediaRoot: mediaRoot, label: item.file, refresh: false)
                var (output, outcome) = await pipeline.processItem(item.payload, context: context)
                // No push waits on a batch: an item whose media another node was still making when
                // its budget ran out is processed again (that node's job is bounded by its own
                // budget), at most `fleetRetries` times, instead of being recorded raw.
                var retries = 0
                while retries < Self.fleetRetries, !Task.isCancelled,
                    (outcome.media ?? [outcome.primary]).contains(where: \.waitedForFleet)
                {
                    retries += 1
                    (output, outcome) = await pipeline.processItem(item.payload, context: context)
                }
                span?.setAttribute("pushmedia.outcome", outcome.label)
                if Task.isCancelled { return false }
                let encoded = (try? JSONEncoder().encode(outcome)).map { Array($0) } ?? Array("{}".utf8)
                return try await queue.complete(
                    name: name, number: item.number, holder: holder, output: output, outcome: encoded)
            }
        }
        let width = concurrency
        var tally = Tally()
        var taken: [FleetQueue.Item] = []
        var running = 0
        try await withThrowingTaskGroup(of: Bool.self) { group in
            // Takes only as many items as there are free slots: under load the others wait in
            // the queue (for this worker or another), not here where their budget would run.
            func next() async throws -> FleetQueue.Item? {
                await mayStart()
                if taken.isEmpty {
                    // Items are held under this node's life: none are taken between two lives.
                    let wait = max(fleet.database.timeout, fleet.database.nodeTimeout)
                    guard let life = await fleet.life.current(within: wait) else {
                        throw FleetError.unreachable(fleet.database.described, why: "the node's own connection is lost")
                    }
                    taken = try await queue.take(
                        name: name, holder: holder, life: life, count: width - running, lease: lease)
                }
                return taken.isEmpty ? nil : taken.removeFirst()
            }
            while running < width, let item = try await next() {
                group.addTask { try await process(item) }
                running += 1
            }
            while let recorded = try await group.next() {
                running -= 1
                if recorded { tally.recorded += 1 } else { tally.lost += 1 }
                if let item = try await next() {
                    group.addTask { try await process(item) }
                    running += 1
                }
            }
        }
        return tally
    }

    /// Where a batch recorded at `location` resolves its local media paths: the folder, or a
    /// manifest's folder.
    public static func mediaRoot(ofLocation location: String) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: location, isDirectory: &isDirectory), !isDirectory.boolValue else {
            return location
        }
        return URL(fileURLWithPath: location).deletingLastPathComponent().path
    }
}
