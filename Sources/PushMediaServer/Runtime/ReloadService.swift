import Dispatch
import Foundation
import Logging
import PushMedia
import PushMediaRelay
import ServiceLifecycle

/// Something `serve` reads again on SIGHUP, without a restart. A failed reload keeps what was in
/// force and throws why (logged by `ReloadService`).
public protocol Reloadable: Sendable {
    /// In the log line of a reload.
    var reloadName: String { get }
    /// Reads files: blocking, run by `ReloadService` on its executor, never on Swift's cooperative pool.
    func reload() throws
    /// Called hourly between reloads (e.g. to update gauges that age); nothing by default.
    func refresh()
}

extension Reloadable {
    public func refresh() {}
}

/// Reloads each of `items` in turn on SIGHUP, on `executor` (their reloads read files), and
/// refreshes them hourly; ends on graceful shutdown. `serve` lists what it can reload in
/// `buildApplication`; add to that list to make another part reloadable.
public struct ReloadService: Service {
    let items: [any Reloadable]
    let executor: BlockingExecutor
    let logger: Logger
    let every: Duration

    public init(
        items: [any Reloadable], executor: BlockingExecutor, logger: Logger, refreshEvery: Duration = .seconds(3600)
    ) {
        self.items = items
        self.executor = executor
        self.logger = logger
        every = refreshEvery
    }

    public func run() async throws {
        let hangups = Self.hangups()
        let items = items
        let executor = executor
        let logger = logger
        let every = every
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in hangups {
                    logger.notice("SIGHUP: reloading", metadata: ["what": "\(items.map(\.reloadName))"])
                    for item in items {
                        // A failure is logged by the item, with its reason; the others still reload.
                        try? await executor.run { try item.reload() }
                    }
                }
            }
            group.addTask {
                while true {
                    do { try await Task.sleep(for: every) } catch { return }
                    for item in items { item.refresh() }
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }

    /// SIGHUP as a stream: the signal's default action (ending the process) is turned off for
    /// the process's life.
    static func hangups() -> AsyncStream<Void> {
        signal(SIGHUP, SIG_IGN)
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let source = SignalSource(DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global()))
        source.source.setEventHandler { continuation.yield() }
        continuation.onTermination = { _ in source.source.cancel() }
        source.source.resume()
        return stream
    }

    /// A dispatch source, used from the stream's termination handler: its methods are thread-safe.
    private final class SignalSource: @unchecked Sendable {
        let source: any DispatchSourceSignal
        init(_ source: any DispatchSourceSignal) { self.source = source }
    }
}

/// The relays' held credentials: the credentials file read again on SIGHUP, and their
/// certificates' days left refreshed hourly.
extension RelayCredentials: Reloadable {}
