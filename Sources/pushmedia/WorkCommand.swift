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
            worker that dies go back to the queue when their lease lapses. Give the same settings \
            as the batch's other workers: the options that change the output are part of the \
            cache key. Exit status: 0 done, 64 usage error, 74 the database or the store failed.
            """
    )

    @Option(help: "The fleet batch to work on (`batch --fleet NAME`).")
    var fleet: String
    @Option(help: "Payloads processed at once (default: one per core).")
    var concurrency: Int = ProcessInfo.processInfo.activeProcessorCount
    @OptionGroup var fleetOptions: FleetOptions
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
        // The same media in several workers' items is made once: the fleet's leases (and its
        // notifications) for the jobs, as `serve` nodes share them.
        let coordinator = try Fleet(database: queue.database, lease: lease, logger: logger)
        // The worker holds its items under its node's name, as it holds its jobs' leases.
        let holder = coordinator.node
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
        let mediaRoot = config.mediaRoot ?? BatchInput.mediaRoot(ofLocation: input)
        // Renews the lease of every item this worker holds, every third of the lease.
        let renewal = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: lease / 3)
                try? await queue.renew(name: name, holder: holder, lease: lease)
            }
        }
        defer { renewal.cancel() }
        // As `batch`: `concurrency` transcodes at once, as many more payloads read and fetched
        // ahead; a slot that frees takes the next item at once (no round waits for its slowest).
        let width = concurrency * 2
        // True when the result was recorded: false when the item's lease lapsed meanwhile (another
        // worker took it and records it) or the batch was deleted.
        let process: @Sendable (FleetQueue.Item) async throws(FleetError) -> Bool = { item in
            let (output, outcome) = await BatchCommand.processPayload(
                item.payload, relative: item.file, pipeline: pipeline, mediaRoot: mediaRoot, refresh: false)
            let encoded = (try? JSONEncoder().encode(outcome)).map { Array($0) } ?? Array("{}".utf8)
            return try await queue.complete(
                name: name, number: item.number, holder: holder, output: output, outcome: encoded)
        }
        var worked = 0
        var lost = 0
        var deleted = false
        do {
            while true {
                var taken: [FleetQueue.Item] = []
                var running = 0
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    func next() async throws -> FleetQueue.Item? {
                        if taken.isEmpty {
                            taken = try await queue.take(name: name, holder: holder, count: width, lease: lease)
                        }
                        return taken.isEmpty ? nil : taken.removeFirst()
                    }
                    while running < width, let item = try await next() {
                        group.addTask { try await process(item) }
                        running += 1
                    }
                    while let recorded = try await group.next() {
                        if recorded { worked += 1 } else { lost += 1 }
                        if let item = try await next() { group.addTask { try await process(item) } }
                    }
                }
                guard let progress = try await queue.progress(name: name) else {
                    deleted = true
                    break
                }
                if progress.finished { break }
                // Others hold the rest: wait for them to finish, or for a dead one's lease to lapse.
                try await Task.sleep(for: .milliseconds(500))
            }
        } catch {
            FileHandle.writeError("pushmedia: work --fleet \(name): \(error)")
            throw Exit.ioError
        }
        let others =
            lost == 0
            ? ""
            : deleted
                ? " (\(lost) more not recorded)"
                : " (\(lost) more whose lease lapsed first: another worker recorded those)"
        print(
            "fleet batch \(name): this worker recorded \(worked) payloads\(others); "
                + (deleted ? "the batch was deleted" : "the batch is done"))
    }
}
