import Foundation
import Logging
import PushMedia
import PushMediaFleet
import PushMediaServer
import PushMediaTestSupport
import Testing

/// The fleet's coordination on a real PostgreSQL (scripts/postgres.sh, started by `make test`):
/// two nodes in this process, each with its own pipeline and its own connections, on one store.
/// scripts/fleet.sh runs three `serve` processes behind nginx the same way.
@Suite(.serialized) struct FleetCoordinationTests {
    static let environment = ProcessInfo.processInfo.environment
    static let database =
        environment["PUSHMEDIA_TEST_FLEET_DB"] ?? "postgres://pushmedia@127.0.0.1:55432/pushmedia?sslmode=disable"
    static let passwordFile =
        environment["PUSHMEDIA_TEST_FLEET_DB_PASSWORD_FILE"] ?? "/var/tmp/pushmedia-postgres/password"

    /// A node: its pipeline on `store`, its fleet running until `stop`.
    final class Node: Sendable {
        let pipeline: Pipeline
        let fleet: Fleet
        let running: Task<Void, Never>

        init(
            store: TemporaryDirectory, database: String = FleetCoordinationTests.database,
            timeout: Duration = .seconds(1)
        )
            async throws
        {
            var config = testConfig(store: store, budget: roomyBudget)
            config.fleetDB = database
            config.fleetDBPasswordFile = FleetCoordinationTests.passwordFile
            config.fleetLease = .seconds(2)
            config.fleetDBTimeout = timeout
            let database = try #require(try FleetDatabase(config: config))
            if config.fleetDB == FleetCoordinationTests.database {
                _ = try await database.initialize(logger: Logger(label: "test"))
            }
            let store = try MediaStore(config: config)
            fleet = try Fleet(
                database: database, lease: config.fleetLease, metrics: ServerMetrics().factory,
                onPurge: { store.forget(key: $0) }, logger: Logger(label: "test"))
            pipeline = try Pipeline(config: config, store: store, coordinator: fleet)
            running = Task { [fleet] in try? await fleet.run() }
        }

        func stop() { running.cancel() }
    }

    static func payload(_ url: String) -> [UInt8] {
        Array(#"{"aps":{"alert":"Spring","mutable-content":1},"image_url":"\#(url)"}"#.utf8)
    }

    /// Requests spread over both nodes at once: one fetch, one job, the same answer everywhere.
    @Test func twoNodesMakeAMediaOnce() async throws {
        let origin = try TestOrigin()
        defer { origin.stop() }
        origin.route(
            "/hero.webp",
            .delayed(.milliseconds(300), body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let store = TemporaryDirectory()
        let nodes = [try await Node(store: store), try await Node(store: store)]
        defer { for node in nodes { node.stop() } }
        let payload = Self.payload(origin.url("/hero.webp"))
        let answers = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<40 {
                group.addTask {
                    let result = try await nodes[index % 2].pipeline.process(payload)
                    return result.payload["image_url"]?.stringValue ?? "none"
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(Set(answers).count == 1 && answers[0].hasSuffix(".jpg"), "\(Set(answers))")
        #expect(origin.hits("/hero.webp") == 1)
        #expect(nodes.map(\.pipeline.jobsRun).reduce(0, +) == 1, "\(nodes.map(\.pipeline.jobsRun))")
    }

    /// A source that cannot be made is tried once in the fleet: the other node answers the
    /// holder's reason.
    @Test func aFailureIsTheFleets() async throws {
        let origin = try TestOrigin()
        defer { origin.stop() }
        origin.route("/gone.jpg", .status(404, body: "gone"))
        let store = TemporaryDirectory()
        let nodes = [try await Node(store: store), try await Node(store: store)]
        defer { for node in nodes { node.stop() } }
        let payload = Self.payload(origin.url("/gone.jpg"))
        let reasons = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<20 {
                group.addTask {
                    let result = try await nodes[index % 2].pipeline.process(payload)
                    return result.outcome.media?.first?.reason ?? "none"
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(Set(reasons) == ["http_404"], "\(reasons)")
        #expect(origin.hits("/gone.jpg") == 1)
    }

    /// A database that does not answer: every node makes the media itself, at once.
    @Test func withoutTheDatabaseEachNodeWorksAlone() async throws {
        let origin = try TestOrigin()
        defer { origin.stop() }
        origin.route("/alone.webp", .file(body: try sampleMedia("banner.webp"), contentType: "image/webp"))
        let (store, other) = (TemporaryDirectory(), TemporaryDirectory())
        // A port nothing listens on.
        let down = "postgres://pushmedia@127.0.0.1:9/pushmedia?sslmode=disable"
        let nodes = [
            try await Node(store: store, database: down, timeout: .milliseconds(300)),
            try await Node(store: other, database: down, timeout: .milliseconds(300)),
        ]
        defer { for node in nodes { node.stop() } }
        let started = ContinuousClock.now
        for node in nodes {
            let result = try await node.pipeline.process(Self.payload(origin.url("/alone.webp")))
            #expect(result.payload["image_url"]?.stringValue?.hasSuffix(".jpg") == true)
        }
        #expect(origin.hits("/alone.webp") == 2)
        #expect(started.duration(to: .now) < roomyBudget)
    }

    /// `--fleet-db` as libpq writes it; the password never in a message.
    @Test func databaseAddresses() throws {
        let address = try FleetDBAddress("postgres://push%40er:p%2Fss@db.internal:6432/media?sslmode=verify-full")
        #expect(address.user == "push@er" && address.password == "p/ss" && address.host == "db.internal")
        #expect(address.port == 6432 && address.database == "media" && address.tls == .verifyFull)
        #expect(try FleetDBAddress("postgresql://u@[::1]/d").host == "::1")
        #expect(try FleetDBAddress("postgres://u@h/d").tls == .prefer)
        for bad in [
            "http://u@h/d", "postgres://h/d", "postgres://u@h/", "postgres://u@h/d?sslmode=maybe",
            "postgres://u@h/d?x=1",
        ] {
            #expect(throws: FleetDBAddress.Invalid.self, "\(bad)") { try FleetDBAddress(bad) }
        }
        #expect(!FleetDBAddress.redacted("postgres://u:s3cret@h/d").contains("s3cret"))
        #expect(!FleetDBAddress.redacted("postgres://u:s3cret@h:bad/d").contains("s3cret"))
        var config = PushMediaConfig()
        #expect {
            try config.set("fleet-db", to: "postgres://u:s3cret@/d")
        } throws: { error in
            "\(error)".contains("--fleet-db") && !"\(error)".contains("s3cret")
        }
    }
}
