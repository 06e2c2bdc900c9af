import Foundation

/// The process's threads for blocking work, its gates and budgets: built once by each command
/// (`serve`, `batch`, …) from its configuration and passed to what uses them. One rule sizes
/// them, from the cores the process may use (`cores`):
///
/// | resource | size |
/// |---|---|
/// | `cpu`: libvips, libmagic, hashing, disk | one thread per core |
/// | `io`: downloads, the index, FFmpeg's child processes (waiting, not computing) | 64 threads |
/// | `storeStreams`: an object store's files streamed to clients (`TransferLoop`: paused, never blocked, while a client is slow) | 1 thread, 512 connections |
/// | `mediaReads`: a local store's files read and checked for `/media` | 4 threads |
/// | `store`: writing down when cache entries were used; `serve`'s retention (`--gc-every`) | 2 threads |
/// | `housekeeping`: readiness checks, reloads on SIGHUP (never behind a long retention run); `gc` | 1 thread |
/// | `gate`: jobs at once, and waiting (`--max-jobs`, `--max-queue`) | as configured (`serve`: 2 per core, at least 10) |
/// | `transcodeGate`: jobs past their fetch (`config.maxTranscodes`) | `batch`: its `--concurrency`; else none |
/// | `decodeBudget`: memory of the image decodes at once (`--decode-memory`) | as configured |
/// | `vips`: libvips' threads per image | every core for the only image being worked on, else one |
public final class ProcessResources: Sendable {
    /// The cores the sizes are made from.
    public let cores: Int
    public let cpu: BlockingExecutor
    public let io: BlockingExecutor
    public let storeStreams: TransferLoop
    public let mediaReads: BlockingExecutor
    public let store: BlockingExecutor
    public let housekeeping: BlockingExecutor
    /// Backpressure, when `config.maxJobs` is set.
    public let gate: JobGate?
    /// Bounds the jobs past their fetch, when `config.maxTranscodes` is set.
    public let transcodeGate: JobGate?
    /// Bounds the memory of the decodes running at once.
    public let decodeBudget: DecodeBudget
    /// How many threads libvips gives an image.
    public let vips: VipsThreads

    /// The resources `config` asks for, sized from `cores`; the executors' threads end after
    /// `idleTimeout` without work.
    public init(
        config: PushMediaConfig, cores: Int = ProcessInfo.processInfo.activeProcessorCount,
        idleTimeout: Duration = .seconds(30)
    ) {
        self.cores = max(1, cores)
        func executor(_ name: String, _ threads: Int) -> BlockingExecutor {
            BlockingExecutor(name: name, maxThreads: threads, idleTimeout: idleTimeout)
        }
        cpu = executor("pushmedia-cpu", self.cores)
        io = executor("pushmedia-fetch", 64)
        storeStreams = TransferLoop(name: "pushmedia-media", maxConnections: 512)
        mediaReads = executor("pushmedia-media-read", 4)
        store = executor("pushmedia-store", 2)
        housekeeping = executor("pushmedia-housekeeping", 1)
        gate = config.maxJobs.map { JobGate(limit: $0, queueLimit: config.maxQueuedJobs) }
        transcodeGate = config.maxTranscodes.map { JobGate(limit: $0, queueLimit: .max) }
        decodeBudget = DecodeBudget(limit: config.decodeMemory)
        vips = VipsThreads(cores: self.cores)
    }
}

/// libvips' threads per image: the only image of the only job running gets one per core (a single
/// request is then as quick as libvips on its own); with other jobs running, each image gets one,
/// and parallelism comes from the images worked on side by side.
public final class VipsThreads: Sendable {
    let cores: Int
    /// Jobs running (fetching, converting, storing) and images being decoded, resized or encoded now.
    private let load = Locked((jobs: 0, working: 0))

    public init(cores: Int = ProcessInfo.processInfo.activeProcessorCount) {
        self.cores = max(1, cores)
    }

    /// A job started: its image may soon be worked on.
    func jobBegan() { load.withLock { $0.jobs += 1 } }
    func jobEnded() { load.withLock { $0.jobs -= 1 } }

    /// The threads for an image about to be worked on; `finished` when it is done.
    func began() -> Int {
        let alone = load.withLock {
            $0.working += 1
            return $0.working == 1 && $0.jobs <= 1
        }
        return alone ? cores : 1
    }

    func finished() { load.withLock { $0.working -= 1 } }
}
