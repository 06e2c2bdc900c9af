import Foundation

/// The whole pipeline: locate → fetch → sniff → decide → transcode → store → rewrite, within a
/// time budget. When the budget runs out, the best attempt so far is returned exactly once;
/// the job itself may go on for `backgroundLimit` to fill the cache. Concurrent payloads that
/// name the same source share one job.
public final class Pipeline: Sendable {
    /// The configuration it was made with.
    public let config: PushMediaConfig
    /// Where attachments and the cache index are kept.
    public let store: MediaStore
    let fetcher: Fetcher
    /// One download for the jobs that fetch the same URL at once (a payload's platform variants).
    let downloads = SharedDownloads()
    /// One transcoder per platform profile.
    let transcoders: [String: Transcoder]
    /// The process's threads, gates and budgets.
    public let resources: ProcessResources
    /// Threads for downloads (mostly waiting on the network).
    var io: BlockingExecutor { resources.io }
    /// Threads for libvips, libmagic, hashing and disk work.
    var cpu: BlockingExecutor { resources.cpu }
    /// The running job of each cache key.
    let inFlight = Locked<[String: SharedJob]>([:])
    /// Backpressure, when `config.maxJobs` is set.
    public var gate: JobGate? { resources.gate }
    /// Bounds the memory of the decodes running at once (`config.decodeMemory`).
    public var decodeBudget: DecodeBudget { resources.decodeBudget }
    /// Bounds the jobs past their fetch (`config.maxTranscodes`).
    var transcodeGate: JobGate? { resources.transcodeGate }
    let optionsFingerprint: String
    /// The options fingerprint of each profile, part of its cache keys.
    let fingerprints: [String: String]
    /// Each profile made to deliver each format a media URL can ask for, with its fingerprint.
    let delivering: [String: [MediaFormat: (profile: PlatformProfile, fingerprint: String)]]
    /// http(s) references already found valid.
    let validURLs = ValidURLs()
    /// Jobs this process has run (fetched and made a media), since it started.
    public var jobsRun: Int { runCount.withLock { $0 } }
    let runCount = Locked(0)
    /// The fleet's coordination of shared jobs (`--fleet-db`), or nil: jobs are shared per node.
    public let coordinator: (any JobCoordinator)?

    /// Opens the store named by `config` (or takes `store`, opened first by a caller whose other
    /// parts need it) and sets up the transcoders, on the process's `resources` (made for
    /// `config` when not given: a command builds them once and passes them), sharing its jobs with
    /// a fleet's other nodes through `coordinator` when given. Freshness is judged by `clock` (the
    /// store's).
    public init(
        config: PushMediaConfig, resources: ProcessResources? = nil, store: MediaStore? = nil,
        coordinator: (any JobCoordinator)? = nil, clock: WallClock = .system
    ) throws(StoreError) {
        self.config = config
        self.coordinator = coordinator
        let resources = resources ?? ProcessResources(config: config)
        self.resources = resources
        if let store {
            self.store = store
        } else {
            self.store = try MediaStore(config: config, background: resources.store, clock: clock)
        }
        fetcher = Fetcher(executor: resources.io)
        var profiles = PlatformProfile.profiles
        profiles[config.profile.id] = config.profile
        transcoders = profiles.mapValues { Transcoder(config: config, profile: $0, threads: resources.vips) }
        fingerprints = profiles.mapValues { Self.optionsFingerprint(config, profile: $0) }
        delivering = profiles.mapValues { profile in
            Dictionary(
                Set(MediaURL.formats.values).compactMap { format in
                    profile.delivering(format).map { (format, ($0, Self.optionsFingerprint(config, profile: $0))) }
                }, uniquingKeysWith: { first, _ in first })
        }
        optionsFingerprint = Self.optionsFingerprint(config)
    }

    /// Checks that the store works (for an object store: the endpoint answers, the credentials are
    /// accepted and the bucket exists), so that a command can refuse to start with a clear error.
    public func verifyStore(timeout: Duration = .seconds(10)) async throws(StoreError) {
        let store = self.store
        let result = await io.run { () -> StoreError? in
            do throws(StoreError) { try store.checkReady(deadline: .now + timeout) } catch { return error }
            return nil
        }
        if let result { throw result }
    }

    /// The cache keys `url` may have here: under every profile, in every format a media URL can
    /// ask for, with this configuration's options (what `purge` removes).
    public func cacheKeys(url: String) -> [String] {
        let identity = url.trimmingCharacters(in: .whitespaces)
        let options = Set(fingerprints.values).union(delivering.values.flatMap(\.values).map(\.fingerprint))
        return options.sorted().map { MediaStore.cacheKey(source: identity, options: $0) }
    }

    /// Removes the cached results for each of `urls`, so that the next request fetches and
    /// processes it again: first those this configuration's options name (under every profile, in
    /// every format a media URL can ask for; not those of a media URL with a `cb:` option), and,
    /// when there are none, every entry made from the URL whatever options made it (the whole
    /// index read: the settings differ from the ones that served). Other processes on the same
    /// store notice within `--index-cache-ttl`. Returns, per URL, the keys removed and whether
    /// they were found by reading the index.
    public func purge(urls: [String]) async throws(StoreError) -> [(url: String, keys: [String], searched: Bool)] {
        let store = self.store
        let keys = urls.map { ($0, cacheKeys(url: $0)) }
        let result = await io.run { () -> Result<[(url: String, keys: [String], searched: Bool)], StoreError> in
            do throws(StoreError) {
                var purged: [(url: String, keys: [String], searched: Bool)] = []
                for (url, keys) in keys {
                    let named = try store.purge(keys: keys, deadline: .now + .seconds(30))
                    if !named.isEmpty {
                        purged.append((url, named, false))
                    } else {
                        let identity = url.trimmingCharacters(in: .whitespaces)
                        let found = try store.purge(
                            sourceID: MediaStore.sourceID(identity), deadline: .now + .seconds(30))
                        purged.append((url, found, true))
                    }
                }
                return .success(purged)
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Processes one payload given as JSON bytes.
    /// - Throws: `PayloadError` when the bytes are not a JSON object (nothing else throws).
    public func process(
        _ json: some Collection<UInt8>,
        context: PayloadContext = PayloadContext()
    ) async throws(PayloadError) -> PipelineResult {
        let value: JSONValue
        do { value = try JSONValue.parse(json) } catch { throw .invalidJSON(error) }
        guard case let .object(payload) = value else { throw .notAnObject(value.kindName) }
        return await processPayload(payload, context: context, sizeAtMost: json.count)
    }

    /// Processes one payload. Always returns a payload that keeps the input's text.
    public func process(_ payload: JSONObject, context: PayloadContext = PayloadContext()) async -> PipelineResult {
        await processPayload(payload, context: context, sizeAtMost: nil)
    }

    /// One batch item's bytes, as `batch` and the fleet's workers process them: the rewritten
    /// payload to write (with a final newline), nil when the bytes are not a payload, and the
    /// outcome (`label`, the item's name, begins its message).
    public func processItem(_ data: some Collection<UInt8>, context: PayloadContext) async -> (
        output: [UInt8]?, outcome: Outcome
    ) {
        do {
            let result = try await process(data, context: context)
            return (result.bytes + [0x0A], result.outcome)
        } catch {
            let label = context.label.map { "\($0): " } ?? ""
            var outcome = Outcome(status: .rejected, reason: error.reason, message: "\(label)\(error.description)")
            outcome.payloadBytes = 0
            return (nil, outcome)
        }
    }
}
