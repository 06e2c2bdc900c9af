import CHTTP2Shim
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOPosix
import NIOSSL
import PushMedia
import ServiceLifecycle

/// A relay's listener: HTTP/2, over TLS or cleartext with prior knowledge (h2c), and with `http1`
/// HTTP/1.1 too, told apart by the HTTP/2 connection preface (so TLS without ALPN works, and h2c
/// and HTTP/1.1 share the cleartext port). Requests are handled on their connection's event loop.
/// `run` returns after a graceful shutdown: accepting stops, each connection finishes the requests
/// in flight on it, then gets `GOAWAY` (HTTP/2) or is closed (HTTP/1.1).
struct RelayListener<Endpoint: RelayEndpoint>: Sendable {
    let endpoint: Endpoint
    let host: String
    let port: Int?
    let tls: NIOSSLContext?
    let http1: Bool
    /// How long connections may take to finish their requests once shutdown began.
    let drainLimit: Duration
    /// What all connections may hold together, and each one.
    let budget: RelayBudget
    /// Where memory is given back to the system once the connections that held it are gone.
    let housekeeping: BlockingExecutor

    /// Serves until graceful shutdown; `onRunning` gets the bound port.
    func run(onRunning: @Sendable (_ port: Int) async -> Void) async throws {
        let endpoint = endpoint
        let tls = tls
        let http1 = http1
        let budget = budget
        let clients = Locked<[ObjectIdentifier: any Channel]>([:])
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // Reads of at most 4 KiB, one per connection per turn of the event loop: a connection
            // that sends thousands of requests at once is read in turns with the others (a few
            // dozen requests a turn), not before them; and TLS keeps a buffer per connection as
            // large as the most one read decrypted.
            .childChannelOption(
                .recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 4096)
            )
            .childChannelOption(.maxMessagesPerRead, value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let id = ObjectIdentifier(channel)
                    let admitted = budget.open(id) { reason in
                        channel.pipeline.fireUserInboundEventTriggered(RelayShed(reason: reason))
                    }
                    guard admitted else {
                        budget.count(.connections)
                        channel.close(promise: nil)
                        return
                    }
                    channel.closeFuture.whenComplete { _ in budget.close(id) }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(RelayIdleGuard(limits: budget.limits))
                    if let tls {
                        try sync.addHandler(NIOSSLServerHandler(context: tls))
                        try sync.addHandler(RelayHandshakeGuard(budget: budget))
                    }
                    if http1 {
                        try sync.addHandler(RelayProtocolSniffer(endpoint: endpoint, budget: budget))
                    } else {
                        try Self.serveHTTP2(sync, endpoint: endpoint, budget: budget)
                    }
                    clients.withLock { $0[id] = channel }
                    channel.closeFuture.whenComplete { _ in _ = clients.withLock { $0.removeValue(forKey: id) } }
                }
            }
            .bind(host: host, port: port ?? 0).get()
        let trimming = budget.trimWhenQuiet(on: server.eventLoop, executor: housekeeping)
        defer { trimming.cancel() }
        await onRunning(server.localAddress?.port ?? port ?? 0)
        try? await gracefulShutdown()
        try? await server.close()
        for channel in clients.withLock({ Array($0.values) }) {
            channel.pipeline.fireUserInboundEventTriggered(RelayDrain())
        }
        let limit = ContinuousClock.now + drainLimit
        while !clients.withLock({ $0.isEmpty }) && ContinuousClock.now < limit {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in clients.withLock({ Array($0.values) }) {
            try? await channel.close()
        }
    }

    static func serveHTTP2(
        _ sync: ChannelPipeline.SynchronousOperations, endpoint: Endpoint, budget: RelayBudget
    ) throws {
        try sync.addHandler(RelayHTTP2Handler(endpoint: endpoint, budget: budget))
    }

    static func serveHTTP1(
        _ sync: ChannelPipeline.SynchronousOperations, endpoint: Endpoint, budget: RelayBudget
    ) throws {
        let requestGuard = RelayRequestGuard(limits: budget.limits, budget: budget)
        try sync.addHandler(requestGuard)
        try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true)
        try sync.addHandler(RelayHTTP1Handler(endpoint: endpoint, budget: budget, requestGuard: requestGuard))
    }
}

/// Asks a connection to go at once: it holds more than the relay can give it (see `RelayBudget`).
struct RelayShed {
    var reason: ShedReason
}

/// Asks a connection to close once the requests in flight on it are answered.
struct RelayDrain {}
