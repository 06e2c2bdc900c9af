import Foundation
import Logging
import NIOCore
import NIOPosix
import PushMedia
import PushMediaTestSupport
import ServiceLifecycle
import Testing
import _CryptoExtras

@testable import PushMediaRelay
@testable import PushMediaServer

/// The relays' held credentials belong to the server: made once, closed once on a graceful
/// shutdown, whichever relays run.
@Suite("Relay credentials' lifecycle")
struct CredentialsLifecycleTests {
    /// An upstream that counts its shutdowns and sends nothing.
    final class ClosingUpstream: RelayUpstream, @unchecked Sendable {
        let authority: String
        let closed = Locked(0)
        var connectionCount: Int { 0 }

        init(authority: String) { self.authority = authority }

        func send(
            _ push: UpstreamPush, pool: String, queue: QueueKey, on eventLoop: any EventLoop, reply: UpstreamReply
        ) {
            eventLoop.execute { reply.fail(ChannelError.ioOnClosedChannel) }
        }

        func shutdown() -> EventLoopFuture<Void> {
            closed.withLock { $0 += 1 }
            return MultiThreadedEventLoopGroup.singleton.any().makeSucceededVoidFuture()
        }
    }

    /// A credentials file holding `entries` (YAML), owner-only, in `directory`; and a service
    /// account for project `shop-1234` beside it, which an entry may name as `sa.json`.
    static func credentials(_ entries: String, in directory: TemporaryDirectory) throws -> String {
        let account = try serviceAccountFile(in: directory)
        let credentials = directory.file("credentials.yaml")
        try entries.replacingOccurrences(of: "sa.json", with: account).write(
            toFile: credentials, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: credentials)
        return credentials
    }

    static let fcmEntry = "fcm:\n  - {name: shop, project_id: shop-1234, service_account: sa.json}\n"

    /// A server with the FCM relay only, holding a service account: on graceful shutdown the
    /// token endpoint's connections are closed, once, after the relay's own upstream.
    @Test func anFCMOnlyServerClosesItsTokenConnections() async throws {
        let directory = TemporaryDirectory()
        let credentials = try Self.credentials(Self.fcmEntry, in: directory)
        var server = ServerConfig()
        server.port = 0
        try server.set("fcm-port", to: "0")
        try server.set("fcm-upstream", to: "https://fcm.test")
        try server.set("relay-credentials", to: credentials)

        let made = Locked<[String: ClosingUpstream]>([:])
        let upstreams = UpstreamMaker { endpoint, _, _, _, _, _, _ throws(RelaySetupError) in
            made.withLock { made in
                let upstream = ClosingUpstream(authority: endpoint.authority)
                made[endpoint.authority] = upstream
                return upstream
            }
        }
        let running = AsyncStream<Void>.makeStream()
        let logger = Logger(label: "test")
        let app = try await buildApplication(
            config: testConfig(store: directory), server: server, baseURLGiven: false, logger: logger, logSink: nil,
            settings: nil, upstreams: upstreams, onMetricsRunning: { _ in },
            onRelayRunning: { relay in if relay.title == "FCM" { running.continuation.yield() } }, onRunning: { _ in })
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = running.stream.makeAsyncIterator()
            await iterator.next()
            let token = try #require(made.withLock { $0["oauth.test"] })
            #expect(token.closed.withLock { $0 } == 0)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            #expect(token.closed.withLock { $0 } == 1, "the token endpoint's connections are closed once")
            #expect(made.withLock { $0["fcm.test"] }?.closed.withLock { $0 } == 1, "and the relay's own")
        }
    }

    /// The exposure rule holds on a reload of the credentials file too: a public FCM relay that
    /// takes its allowed projects' own tokens may not start holding a service account, so a
    /// file that adds one is refused and the set in force stays.
    @Test func aReloadThatWouldExposeHeldCredentialsIsRefused() throws {
        let directory = TemporaryDirectory()
        let credentials = try Self.credentials("apns: []\nfcm: []\n", in: directory)
        var server = ServerConfig()
        try server.set("fcm-port", to: "0")
        try server.set("fcm-host", to: "0.0.0.0")
        try server.set("fcm-allow-project", to: "shop-1234")
        try server.set("fcm-upstream", to: "https://fcm.test")
        try server.set("relay-credentials", to: credentials)
        let upstreams = UpstreamMaker { endpoint, _, _, _, _, _, _ throws(RelaySetupError) in
            ClosingUpstream(authority: endpoint.authority)
        }
        let parts = try ServerParts(config: testConfig(store: directory), server: server, upstreams: upstreams)
        #expect(!parts.credentials.holdsFCM)
        _ = try Self.credentials(Self.fcmEntry, in: directory)
        #expect { try parts.credentials.reload() } throws: {
            "\($0)".contains("refusing to run the FCM relay on 0.0.0.0")
        }
        #expect(!parts.credentials.holdsFCM, "the set in force stays")
        #expect(parts.credentials.fcmToken(forProject: "shop-1234") == nil)
    }
}
