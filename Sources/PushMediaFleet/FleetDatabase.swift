import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import PushMedia

/// Why the fleet's database cannot be used; each names the database without its password.
public enum FleetError: Error, CustomStringConvertible, Sendable {
    /// `--fleet-db-password-file` could not be read.
    case passwordFile(path: String, why: String)
    /// Nothing answered in time, or the connection was refused: the database is down.
    case unreachable(String, why: String)
    /// The server refused the user, the password or the database.
    case refused(String, why: String)
    /// What answered does not speak PostgreSQL's protocol (or not its TLS).
    case notPostgreSQL(String, why: String)
    /// TLS was asked for (`sslmode`) and could not be set up: the roots file, or the server's
    /// certificate or handshake.
    case tls(String, why: String)
    /// The tables are not there: `pushmedia fleet-db init` makes them.
    case schemaMissing(String)
    /// The tables were made by another version of PushMedia.
    case schemaVersion(String, found: Int, expected: Int)
    /// A statement failed.
    case statement(String, why: String)

    public var description: String {
        switch self {
        case let .passwordFile(path, why):
            "--fleet-db-password-file \(path) cannot be read: \(why)"
        case let .unreachable(address, why):
            "the fleet database \(address) cannot be reached: \(why)"
        case let .refused(address, why):
            "the fleet database \(address) refused the connection: \(why)"
        case let .notPostgreSQL(address, why):
            "\(address) does not answer as a PostgreSQL server: \(why)"
        case let .tls(address, why):
            "TLS to the fleet database \(address) failed: \(why)"
        case let .schemaMissing(address):
            "the fleet database \(address) has no PushMedia tables: run `pushmedia fleet-db init` with the same "
                + "--fleet-db"
        case let .schemaVersion(address, found, expected):
            "the fleet database \(address) has PushMedia's tables of version \(found), this pushmedia uses "
                + "version \(expected)"
                + (found < expected ? ": run `pushmedia fleet-db init` to migrate them" : ": upgrade this node")
        case let .statement(address, why):
            "the fleet database \(address) failed a statement: \(why)"
        }
    }

    /// Whether the database is only down (a node starts without it and joins when it is back),
    /// not misconfigured.
    public var isOutage: Bool {
        if case .unreachable = self { return true }
        return false
    }
}

/// The fleet's database: its address, its tables, and the connections to it.
public struct FleetDatabase: Sendable {
    /// The version of the tables this build reads and writes.
    public static let schemaVersion = 3
    /// The one channel of `NOTIFY`: jobs' ends and purges.
    static let channel = "pushmedia"

    public let address: FleetDBAddress
    let password: String?
    /// How long a statement may take before the node goes on without the fleet.
    public let timeout: Duration
    /// How long a node's life connection may be silent before PostgreSQL ends it (`FleetLife`).
    public let nodeTimeout: Duration

    /// The database `config` names (`--fleet-db`), with `--fleet-db-password-file`'s password; nil
    /// when no fleet is configured.
    public init?(config: PushMediaConfig) throws(FleetError) {
        guard let text = config.fleetDB else { return nil }
        let address: FleetDBAddress
        do { address = try FleetDBAddress(text) } catch {
            throw .refused(FleetDBAddress.redacted(text), why: "not a database address: expected \(error.expected)")
        }
        self.address = address
        timeout = config.fleetDBTimeout
        nodeTimeout = max(config.fleetNodeTimeout, .seconds(1))
        if let path = config.fleetDBPasswordFile {
            do {
                let text = try String(contentsOfFile: path, encoding: .utf8)
                password = String(text.trimmingCharacters(in: .newlines))
            } catch {
                throw .passwordFile(path: path, why: (error as NSError).localizedDescription)
            }
        } else {
            password = address.password
        }
    }

    /// The address as messages show it.
    public var described: String { address.described }

    /// libpq's `sslmode` as NIO's TLS.
    func tlsConfiguration() throws(FleetError) -> TLSConfiguration? {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch address.tls {
        case .disable:
            return nil
        case .prefer, .require:
            tls.certificateVerification = .none
        case .verifyFull:
            tls.certificateVerification = .fullVerification
            if let roots = address.rootCertificates {
                do { tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(roots)) } catch {
                    throw .tls(
                        described, why: "sslrootcert \(roots) is not a readable PEM file of certificates (\(error))")
                }
            }
        }
        return tls
    }

    /// The pool's configuration: a few connections (a claim is one short statement).
    func clientConfiguration() throws(FleetError) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch (address.tls, try tlsConfiguration()) {
            case (.disable, _), (_, nil): .disable
            case (.prefer, let tls?): .prefer(tls)
            case (_, let tls?): .require(tls)
            }
        var configuration = PostgresClient.Configuration(
            host: address.host, port: address.port, username: address.user, password: password,
            database: address.database, tls: tls)
        configuration.options.minimumConnections = 1
        configuration.options.maximumConnections = 4
        configuration.options.connectTimeout = timeout
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(15))
        return configuration
    }

    /// One connection, outside the pool (`LISTEN`, and the checks before a command starts).
    func connect(logger: Logger, timeout: Duration? = nil) async throws(FleetError) -> PostgresConnection {
        let tls: PostgresConnection.Configuration.TLS
        do {
            tls =
                switch (address.tls, try tlsConfiguration()) {
                case (.disable, _), (_, nil): .disable
                case (.prefer, let tls?): .prefer(try NIOSSLContext(configuration: tls))
                case (_, let tls?): .require(try NIOSSLContext(configuration: tls))
                }
        } catch let error as FleetError {
            throw error
        } catch {
            throw .refused(described, why: "TLS cannot be set up (\(error))")
        }
        var configuration = PostgresConnection.Configuration(
            host: address.host, port: address.port, username: address.user, password: password,
            database: address.database, tls: tls)
        let limit = timeout ?? self.timeout
        configuration.options.connectTimeout = .nanoseconds(limit.nanoseconds)
        let closeLate: @Sendable (PostgresConnection) async -> Void = { try? await $0.close() }
        do {
            return try await withDeadline(limit, late: closeLate) { [configuration] in
                try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
            }
        } catch {
            if error is DeadlineExceeded, await acceptsConnections(within: limit) {
                // Something listens there but did not answer PostgreSQL's startup message.
                throw .notPostgreSQL(described, why: "no answer to PostgreSQL's startup message within \(limit)")
            }
            if let error = error as? PSQLError, [.serverClosedConnection, .uncleanShutdown].contains(error.code),
                await acceptsConnections(within: limit)
            {
                // PostgreSQL says why it refuses a session (shutting down, too many clients);
                // closing without a word is what other servers do with its startup message.
                throw .notPostgreSQL(
                    described, why: "the connection was closed without an answer to the startup message")
            }
            throw classify(error)
        }
    }

    /// Whether a TCP connection to the address opens within `limit` (and is closed at once).
    private func acceptsConnections(within limit: Duration) async -> Bool {
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.nanoseconds(limit.nanoseconds))
        guard let channel = try? await bootstrap.connect(host: address.host, port: address.port).get() else {
            return false
        }
        try? await channel.close()
        return true
    }

    /// An error of postgres-nio as what it means for the fleet; never with the password (its
    /// own descriptions leave statements and server details out; the server's message and
    /// SQLSTATE are kept).
    func classify(_ error: any Error) -> FleetError {
        if let error = error as? FleetError { return error }
        guard let error = error as? PSQLError else {
            if error is DeadlineExceeded { return .unreachable(described, why: "no answer within \(timeout)") }
            return .unreachable(described, why: "\(error)")
        }
        let state = error.serverInfo?[.sqlState] ?? ""
        let message = error.serverInfo?[.message] ?? ""
        switch error.code {
        case .server where state.hasPrefix("28"):
            return .refused(described, why: "\(message) (SQLSTATE \(state): wrong user or password?)")
        case .server where state == "3D000":
            return .refused(described, why: "\(message) (SQLSTATE \(state))")
        case .server where state.hasPrefix("57P") || state.hasPrefix("08") || state == "53300":
            return .unreachable(described, why: "\(message) (SQLSTATE \(state))")
        case .server:
            return .statement(described, why: "\(message) (SQLSTATE \(state))")
        case .connectionError:
            if let failure = error.underlying as? NIOSSLError { return tlsFailure(failure) }
            return .unreachable(described, why: error.underlying.map { "\($0)" } ?? "connection failed")
        case .serverClosedConnection, .uncleanShutdown, .clientClosedConnection, .poolClosed:
            return .unreachable(described, why: "the connection was closed")
        case .sslUnsupported:
            return .refused(described, why: "the server does not offer TLS (sslmode=\(address.tls.rawValue))")
        case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            return .refused(described, why: "authentication failed (\(error.code))")
        case .queryCancelled:
            return .unreachable(described, why: "no answer within \(timeout)")
        default:
            return .notPostgreSQL(described, why: "\(error.code)")
        }
    }

    /// A failed TLS handshake as what to do about it: BoringSSL's reason (e.g.
    /// `CERTIFICATE_VERIFY_FAILED`), and for a certificate that is not trusted, what `verify-full` checks.
    func tlsFailure(_ failure: NIOSSLError) -> FleetError {
        let text = "\(failure)"
        let reason = text.firstMatch(of: /OPENSSL_internal:([A-Z0-9_]+)/).map { String($0.output.1) } ?? text
        guard reason == "CERTIFICATE_VERIFY_FAILED" || text.contains("unableToValidateCertificate") else {
            return .tls(described, why: "the handshake failed (\(reason))")
        }
        let roots = address.rootCertificates.map { "the roots in sslrootcert \($0)" } ?? "the system's roots"
        return .tls(
            described,
            why: "the server's certificate is not trusted (\(reason)): sslmode=verify-full checks it against "
                + "\(roots) and the host name \(address.host); give sslrootcert=FILE with the CA that signed it")
    }

    /// Checks that the database answers with this build's tables; `FleetError` says what is wrong.
    public func check(logger: Logger) async throws(FleetError) {
        let connection = try await connect(logger: logger, timeout: max(timeout, .seconds(5)))
        defer { Task { try? await connection.close() } }
        let version: Int
        do {
            let rows = try await connection.query("SELECT version FROM pushmedia_schema", logger: logger)
            var found: Int?
            for try await (value) in rows.decode(Int.self) { found = value }
            guard let found else { throw FleetError.schemaMissing(described) }
            version = found
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {
            throw .schemaMissing(described)
        } catch {
            throw classify(error)
        }
        guard version == Self.schemaVersion else {
            throw .schemaVersion(described, found: version, expected: Self.schemaVersion)
        }
    }

    /// Creates the tables, or migrates them to this build's version: `pushmedia fleet-db init`.
    /// Returns the version found before (nil: none).
    public func initialize(logger: Logger) async throws(FleetError) -> Int? {
        let connection = try await connect(logger: logger, timeout: max(timeout, .seconds(5)))
        defer { Task { try? await connection.close() } }
        do {
            // One `init` at a time; the statements are idempotent.
            try await connection.query("BEGIN", logger: logger)
            try await connection.query("SELECT pg_advisory_xact_lock(7355608)", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS pushmedia_schema (version integer NOT NULL)", logger: logger)
            var before: Int?
            for try await (value) in try await connection.query("SELECT version FROM pushmedia_schema", logger: logger)
                .decode(Int.self)
            {
                before = value
            }
            if let before, before > Self.schemaVersion {
                try await connection.query("ROLLBACK", logger: logger)
                throw FleetError.schemaVersion(described, found: before, expected: Self.schemaVersion)
            }
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS pushmedia_leases (
                    key text PRIMARY KEY,
                    holder text NOT NULL,
                    expires timestamptz NOT NULL,
                    state text NOT NULL,
                    reason text NOT NULL DEFAULT '',
                    message text NOT NULL DEFAULT ''
                )
                """, logger: logger)
            try await connection.query(
                "CREATE INDEX IF NOT EXISTS pushmedia_leases_expires ON pushmedia_leases (expires)", logger: logger)
            // Version 2: batches shared by many workers (`FleetQueue`).
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS pushmedia_batches (
                    name text PRIMARY KEY,
                    input text NOT NULL,
                    items integer NOT NULL,
                    created timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS pushmedia_batch_items (
                    batch text NOT NULL REFERENCES pushmedia_batches (name) ON DELETE CASCADE,
                    item integer NOT NULL,
                    file text NOT NULL,
                    payload text NOT NULL,
                    state text NOT NULL DEFAULT 'queued',
                    holder text NOT NULL DEFAULT '',
                    expires timestamptz,
                    output text,
                    outcome text,
                    finished timestamptz,
                    PRIMARY KEY (batch, item)
                )
                """, logger: logger)
            try await connection.query(
                "CREATE INDEX IF NOT EXISTS pushmedia_batch_items_state ON pushmedia_batch_items (batch, state)",
                logger: logger)
            // The items not done, for the queue's depth (`Fleet.refreshQueueDepth`): counted from this
            // index alone, however many items done the batches keep. Added to version 2 by `init`.
            try await connection.query(
                """
                CREATE INDEX IF NOT EXISTS pushmedia_batch_items_unfinished
                    ON pushmedia_batch_items (state, expires) WHERE state <> 'done'
                """, logger: logger)
            // Version 3: leases and items tied to their holder's life (`FleetLife`): the pid of
            // its life connection, and a fencing token per lease.
            try await connection.query(
                """
                ALTER TABLE pushmedia_leases
                    ADD COLUMN IF NOT EXISTS holder_pid integer NOT NULL DEFAULT 0,
                    ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 0
                """, logger: logger)
            try await connection.query("CREATE SEQUENCE IF NOT EXISTS pushmedia_lease_epochs", logger: logger)
            try await connection.query(
                "ALTER TABLE pushmedia_batch_items ADD COLUMN IF NOT EXISTS holder_pid integer NOT NULL DEFAULT 0",
                logger: logger)
            try await connection.query("DELETE FROM pushmedia_schema", logger: logger)
            try await connection.query(
                "INSERT INTO pushmedia_schema (version) VALUES (\(Self.schemaVersion))", logger: logger)
            try await connection.query("COMMIT", logger: logger)
            return before
        } catch {
            throw classify(error)
        }
    }
}

/// A deadline passed before the work ended.
struct DeadlineExceeded: Error {}

/// `work`, or `DeadlineExceeded` once `limit` has passed (`CancellationError` once the caller is
/// cancelled): the work is cancelled then, and not
/// waited for (not every step of a connection's start heeds cancellation); what it returns
/// after the deadline goes to `late` (a connection to close).
func withDeadline<T: Sendable>(
    _ limit: Duration, late: @escaping @Sendable (T) async -> Void = { _ in },
    _ work: @escaping @Sendable () async throws -> T
) async throws -> T {
    let resolver = OnceResolver<Result<T, any Error>>()
    let task = Task {
        let result: Result<T, any Error>
        do { result = .success(try await work()) } catch { result = .failure(error) }
        if !resolver.resolve(result), case let .success(value) = result { await late(value) }
    }
    let timer = Task {
        try? await Task.sleep(for: limit)
        resolver.resolve(.failure(DeadlineExceeded()))
    }
    // The caller's cancellation ends the wait too.
    let result = await withTaskCancellationHandler {
        await resolver.value()
    } onCancel: {
        resolver.resolve(.failure(CancellationError()))
    }
    timer.cancel()
    task.cancel()
    return try result.get()
}
