import Logging
import PushMedia
import ServiceLifecycle

/// `serve --gc-every`: runs the store's retention pass on its own thread every `every`, logging
/// what it removed, until the server stops.
struct RetentionService: Service {
    let store: MediaStore
    let every: Duration
    let policy: RetentionPolicy
    let logger: Logger
    /// The process's housekeeping thread.
    let executor: BlockingExecutor

    init(store: MediaStore, every: Duration, policy: RetentionPolicy, executor: BlockingExecutor, logger: Logger) {
        self.store = store
        self.executor = executor
        self.every = every
        self.policy = policy
        self.logger = logger
    }

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: every)
                let result = await executor.run { [store, policy] () -> Result<RetentionReport, StoreError> in
                    do throws(StoreError) { return .success(try store.collectGarbage(policy)) } catch {
                        return .failure(error)
                    }
                }
                switch result {
                case let .success(report):
                    logger.info(
                        "retention",
                        metadata: [
                            "entries_removed": "\(report.entriesRemoved)", "entries_kept": "\(report.entriesKept)",
                            "media_removed": "\(report.mediaRemoved)", "bytes_removed": "\(report.bytesRemoved)",
                            "bytes_kept": "\(report.bytesKept)",
                        ])
                case let .failure(error):
                    logger.warning("retention failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
