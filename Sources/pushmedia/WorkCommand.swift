import ArgumentParser
import Foundation
import Logging
import PushMedia
import PushMediaFleet

struct WorkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "work",
        abstract: "Process a fleet batch's payloads (`batch --fleet NAME`) beside any number of other workers.",
        discussion: """
            Takes the batch's items from the fleet's queue (--fleet-db) a few at a time, each under a \
            lease (--fleet-lease) renewed while it works, processes them as `batch` does, and \
            records their results; exits 0 once every item of the batch is done. The items of a \
            worker that dies go back to the queue at once, a frozen one's after \
            --fleet-node-timeout. Give the same settings \
            as the batch's other workers: the options that change the output are part of the \
            cache key. Exit status: 0 done, 64 usage error, 74 the database or the store failed.
            """
    )

    @Option(help: "The fleet batch to work on (`batch --fleet NAME`).")
    var fleet: String
    @Option(name: .customLong("concurrency"), help: "Payloads processed at once (default: one per core).")
    var concurrencyGiven: Int?
    /// `--concurrency`, one per core when not given.
    var concurrency: Int { concurrencyGiven ?? ProcessInfo.processInfo.activeProcessorCount }
    @OptionGroup var fleetOptions: FleetOptions
    @OptionGroup var tracing: TracingOptions
    @OptionGroup var options: SharedOptions

    func validate() throws {
        try FleetBatch.validate(name: fleet)
        guard (1...1024).contains(concurrency) else {
            throw ValidationError("--concurrency must be between 1 and 1024")
        }
    }

    func run() async throws {
        var config = try options.config()
        do { try config.apply(fleetOptions.given) } catch { throw ValidationError(error.description) }
        config.maxTranscodes = concurrency
        let queue = try await FleetBatch.openQueue(config)
        defer { Task { await queue.close() } }
        let logger = Logger(label: "pushmedia")
        let name = fleet
        let lease = config.fleetLease
        let input: String
        do {
            guard let progress = try await queue.progress(name: name) else {
                FileHandle.writeError("pushmedia: there is no fleet batch \(name)")
                throw Exit.usage
            }
            input = progress.input
        } catch let error as FleetError {
            FileHandle.writeError("pushmedia: work --fleet \(name): \(error)")
            throw Exit.ioError
        }
        // Each item in a trace of its own when the sampler records it (`--otel-*`, `OTEL_*`).
        let traces = try tracing.commandTracing(configFile: options.configFile)
        // The same media in several workers' items is made once: the fleet's leases (and its
        // notifications) for the jobs, as `serve` nodes share them.
        let coordinator = try Fleet(database: queue.database, lease: lease, sampler: traces.sampler, logger: logger)
        let coordination = Task { try? await coordinator.run() }
        defer { coordination.cancel() }
        let pipeline: Pipeline
        do {
            pipeline = try Pipeline(
                config: config, resources: ProcessResources(config: config), coordinator: coordinator)
            try await pipeline.verifyStore()
        } catch {
            FileHandle.writeError("pushmedia: \(config.storeLocation): \(error)")
            throw Exit.ioError
        }
        let mediaRoot = config.mediaRoot ?? FleetWorker.mediaRoot(ofLocation: input)
        let worker = FleetWorker(queue: queue, fleet: coordinator, pipeline: pipeline, concurrency: concurrency)
        let tally: FleetWorker.Tally
        let deleted: Bool
        do {
            (tally, deleted) = try await traces.run {
                var tally = FleetWorker.Tally()
                while true {
                    tally += try await worker.work(batch: name, mediaRoot: mediaRoot)
                    guard let progress = try await queue.progress(name: name) else { return (tally, true) }
                    if progress.finished { return (tally, false) }
                    // Others hold the rest: wait for them to finish, or for a dead or frozen one's
                    // items to come back to the queue.
                    try await Task.sleep(for: .milliseconds(500))
                }
            }
        } catch {
            FileHandle.writeError("pushmedia: work --fleet \(name): \(error)")
            throw Exit.ioError
        }
        let (worked, lost) = (tally.recorded, tally.lost)
        let others =
            lost == 0
            ? ""
            : deleted
                ? " (\(lost) more not recorded)"
                : " (\(lost) more that passed to another worker first: it recorded those)"
        print(
            "fleet batch \(name): this worker recorded \(worked) payloads\(others); "
                + (deleted ? "the batch was deleted" : "the batch is done"))
    }
}
