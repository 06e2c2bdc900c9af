import Foundation
import PushMedia

/// The project's real S3-compatible object store for tests: OpenStack Swift with its s3api
/// middleware on 127.0.0.1, started by `scripts/object-store.sh` (idempotent; `make test` starts
/// it first, and a test that needs it starts it too when it is not running).
public enum TestObjectStore {
    public static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent().path
    public static let script = repository + "/scripts/object-store.sh"

    /// The settings `scripts/object-store.sh env` prints.
    public static let settings: [String: String] = {
        let output = (try? run(["env"])) ?? ""
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return values
    }()

    public static var endpoint: String { settings["PUSHMEDIA_S3_ENDPOINT"] ?? "http://127.0.0.1:9480" }
    public static var accessKey: String { settings["AWS_ACCESS_KEY_ID"] ?? "" }
    public static var secretKey: String { settings["AWS_SECRET_ACCESS_KEY"] ?? "" }
    /// Public (anonymous) URL prefix of the account: `<this>/<bucket>/<key>` serves an object of a public bucket.
    public static var publicURL: String { settings["PUSHMEDIA_S3_PUBLIC_URL"] ?? "" }

    /// Runs the script with `arguments`; returns its standard output, throws when it fails.
    /// Spawned and reaped directly (posix_spawn, waitpid), output through files: `start` leaves
    /// daemons behind, and Foundation's `Process` was seen to miss the script's exit then.
    @discardableResult
    public static func run(_ arguments: [String]) throws -> String {
        let folder = FileManager.default.temporaryDirectory.path + "/pushmedia-object-store-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, folder + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, folder + "/err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ["/bin/bash", script] + arguments
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for argument in cArgs { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, &cArgs, environ)
        guard spawned == 0 else {
            throw CocoaError(
                .executableLoad,
                userInfo: [NSLocalizedDescriptionKey: "cannot run \(script): \(String(cString: strerror(spawned)))"])
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOfFile: folder + "/out", encoding: .utf8)) ?? ""
        let messages = (try? String(contentsOfFile: folder + "/err", encoding: .utf8)) ?? ""
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        guard exited && code == 0 else {
            throw CocoaError(
                .executableLoad,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "object-store.sh \(arguments.joined(separator: " ")) failed (status \(status)): \(messages)"
                ])
        }
        return output
    }

    private static let startLock = NSLock()

    /// Starts the store unless it answers already.
    public static func start() throws {
        startLock.lock()
        defer { startLock.unlock() }
        try run(["start"])
    }

    /// Stops every server of the store (to test an outage); `start()` brings it back.
    public static func stop() throws {
        try run(["stop"])
    }

    /// Settings for `bucket` with the store's credentials.
    public static func s3Settings(bucket: String, prefix: String = "") -> S3Settings {
        S3Settings(endpoint: endpoint, bucket: bucket, prefix: prefix, accessKey: accessKey, secretKey: secretKey)
    }

    /// A new, empty bucket with a unique name (`object-store.sh make-bucket`); with `publicRead`,
    /// anonymous GETs of its objects work at `publicURL/<bucket>/<key>`.
    public static func makeBucket(publicRead: Bool = false) throws -> String {
        try start()
        let bucket = "pm-" + UUID().uuidString.prefix(13).lowercased().replacingOccurrences(of: "-", with: "")
        try run(["make-bucket", bucket])
        if publicRead { try run(["public-read", bucket]) }
        return bucket
    }

    /// A test configuration whose store is `s3://bucket/prefix` (work files under `work`).
    public static func config(
        bucket: String, prefix: String = "media", work: TemporaryDirectory,
        budget: Duration = .seconds(10)
    ) -> PushMediaConfig {
        var config = PushMediaConfig()
        config.storeLocation = "s3://\(bucket)" + (prefix.isEmpty ? "" : "/" + prefix)
        config.s3Endpoint = endpoint
        config.s3AccessKey = accessKey
        config.s3SecretKey = secretKey
        config.workDirectory = work.path
        config.baseURL = publicURL + "/" + bucket + (prefix.isEmpty ? "" : "/" + prefix)
        config.budget = budget
        config.allowPrivateNetworks = true
        return config
    }

    /// Environment for a `pushmedia` process using this store (credentials as AWS variables).
    public static var environment: [String: String] {
        ["AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey]
    }
}
