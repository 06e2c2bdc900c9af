import Logging
import PushMedia
import PushMediaFleet
import ServiceLifecycle

/// `serve --fleet-worker N`: the node works the fleet's batches (`batch --fleet`) in the
/// background beside its requests, as `pushmedia work` does (`FleetWorker`), N items at a time,
/// oldest batch first. It starts an item only while no request waits for a job slot, so a
/// campaign's warm-up never delays a live answer by more than the items already running. With
/// nothing to take it asks again every `idle`; a database that fails is tried again after
/// `retry`, with one warning. Local media paths in a batch are not read here (the hook never
/// reads local files): run `pushmedia work` for a batch that has them.
struct FleetWorkerService: Service {
    /// The node's fleet: its database, its name, its lease and its traces' sampler.
    let fleet: Fleet
    let pipeline: Pipeline
    let concurrency: Int
    let logger: Logger
    var idle: Duration = .seconds(2)
    var retry: Duration = .seconds(5)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var queue: FleetQueue?
            var failing = false
            while !Task.isCancelled {
                do {
                    let open: FleetQueue
                    if let queue {
                        open = queue
                    } else {
                        open = try await FleetQueue.open(fleet.database, logger: logger)
                    }
                    queue = open
                    if failing {
                        failing = false
                        logger.info("fleet worker: the database answers again")
                    }
                    guard let batch = try await open.batchWithWork() else {
                        try await Task.sleep(for: idle)
                        continue
                    }
                    let worker = FleetWorker(queue: open, fleet: fleet, pipeline: pipeline, concurrency: concurrency)
                    // Each item waits until no request waits for a job slot and one is free.
                    let tally = try await worker.work(batch: batch.name, mediaRoot: nil) { [gate = pipeline.gate] in
                        await gate?.idle()
                    }
                    if tally.recorded + tally.lost > 0 {
                        logger.info(
                            "fleet batch worked",
                            metadata: [
                                "batch": "\(batch.name)", "recorded": "\(tally.recorded)", "lost": "\(tally.lost)",
                            ])
                    }
                } catch is CancellationError {
                    break
                } catch {
                    if Task.isCancelled { break }
                    if !failing {
                        failing = true
                        logger.warning("fleet worker: \(error); trying again every \(retry)")
                    }
                    await queue?.close()
                    queue = nil
                    try? await Task.sleep(for: retry)
                }
            }
            await queue?.close()
        }
    }
}
