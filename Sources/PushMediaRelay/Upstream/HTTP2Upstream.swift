import CHTTP2Shim
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import PushMedia

/// The HTTP/2 client of the relays, to Apple (`--apns-upstream`) or Google (`--fcm-upstream`):
/// per pool (a provider team for APNs, which accepts one team's tokens per connection) one
/// connection on each event loop, so that a push goes out on the thread its client's
/// connection is served on. Connections are kept and reused, their streams multiplexed up to the
/// server's `SETTINGS_MAX_CONCURRENT_STREAMS`; pushes past it wait in the connection's fair queue
/// (`FairQueue`: by app, priority and client connection). A connection that received `GOAWAY`
/// or closed takes no new streams; the next push opens a new one. A push the server did not
/// process is sent once more on a new connection.
final class HTTP2Upstream: Sendable {
    let endpoint: UpstreamEndpoint
    let timeout: Duration
    /// The HTTP/2 settings and bounds of its connections.
    let limits: RelayLimits
    private let tls: NIOSSLContext
    /// A pool's connection on one event loop.
    private struct Slot: Hashable {
        var pool: String
        var eventLoop: ObjectIdentifier
    }
    private let connections = Locked<[Slot: UpstreamConnection]>([:])
    private let backoff = ReconnectBackoff()
    private let logger: Logger

    /// `extraCA` is also trusted (`caSetting` names its flag in errors); `certificate` is
    /// presented as the TLS client certificate (an APNs certificate credential).
    init(
        endpoint: UpstreamEndpoint, timeout: Duration, limits: RelayLimits, extraCA: String?, caSetting: String,
        logger: Logger, certificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)? = nil
    ) throws(RelaySetupError) {
        self.endpoint = endpoint
        self.timeout = timeout
        self.limits = limits
        self.logger = logger
        var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
        tlsConfiguration.applicationProtocols = ["h2"]
        tlsConfiguration.minimumTLSVersion = .tlsv12
        if let extraCA {
            tlsConfiguration.additionalTrustRoots = [.file(extraCA)]
        }
        if let certificate {
            tlsConfiguration.certificateChain = certificate.chain.map { .certificate($0) }
            tlsConfiguration.privateKey = .privateKey(certificate.key)
        }
        do { tls = try NIOSSLContext(configuration: tlsConfiguration) } catch {
            throw .unreadable(what: caSetting, path: extraCA ?? "", why: "\(error)")
        }
    }

    /// Open connections.
    var connectionCount: Int { connections.withLock { $0.count } }

    /// Sends `push` on `pool`'s connection of `eventLoop`, waiting its turn there under `queue`;
    /// a push the server did not process is sent once more. `reply` gets the answer or the
    /// failure, once, on `eventLoop`. While connecting fails, new connections wait out a backoff
    /// (see `ReconnectBackoff`) and pushes meanwhile fail at once.
    func send(_ push: UpstreamPush, pool: String, queue: QueueKey, on eventLoop: any EventLoop, reply: UpstreamReply) {
        if let failure = backoff.refusal(pool: pool) { return reply.fail(failure) }
        connection(for: pool, on: eventLoop).send(
            push, queue: queue,
            reply: UpstreamReply(span: reply.span) { result in
                if case let .failure(error) = result, case UpstreamFailure.notProcessed = error {
                    return self.connection(for: pool, on: eventLoop).send(push, queue: queue, reply: reply)
                }
                reply.deliver(result)
            })
    }

    /// `pool`'s open connection on `eventLoop`, or a new one.
    private func connection(for pool: String, on eventLoop: any EventLoop) -> UpstreamConnection {
        let key = Slot(pool: pool, eventLoop: ObjectIdentifier(eventLoop))
        let (connection, opened) = connections.withLock { connections in
            if let connection = connections[key], connection.usable { return (connection, false) }
            let connection = UpstreamConnection(
                endpoint: endpoint, tls: tls, eventLoop: eventLoop, timeout: TimeAmount(timeout), limits: limits,
                logger: logger)
            connections[key] = connection
            return (connection, true)
        }
        // Outside the lock: a callback on a future already complete runs at once, and takes it.
        if opened {
            backoff.watch(connection, pool: pool)
            connection.closed.whenComplete { [weak self, weak connection] _ in
                self?.connections.withLock { connections in
                    if let connection, connections[key] === connection { connections[key] = nil }
                }
            }
        }
        return connection
    }

    /// Closes every connection.
    func shutdown() -> EventLoopFuture<Void> {
        let all = connections.withLock { Array($0.values) }
        let group = MultiThreadedEventLoopGroup.singleton
        return EventLoopFuture.andAllComplete(all.map { $0.close() }, on: group.any())
    }
}

extension TimeAmount {
    init(_ duration: Duration) { self = .nanoseconds(duration.nanoseconds) }
}

extension String {
    /// Whether this is an IPv4 or IPv6 literal (no SNI is sent for those).
    var isIPAddress: Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, self, &v4) == 1 || inet_pton(AF_INET6, self, &v6) == 1
    }
}
