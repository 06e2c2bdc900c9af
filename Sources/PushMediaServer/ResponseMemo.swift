import Foundation
import PushMedia

/// Answers to repeated `/v1/process` requests and rewritten payloads of repeated relayed pushes.
/// A campaign tool sends the same payload for every device; once its media came from the
/// cache, the answer to the same body under the same options is the same bytes except for the
/// time taken (a relayed push's payload: the same bytes). Those answers are kept ready, split
/// around `timings_ms.total`, and served without parsing, rewriting or encoding again, after
/// checking that the stored files still look whole (`MediaStore.looksIntact`: a local file's
/// size, at most every quarter second; an object store's files are taken as present). Only answers whose every media
/// reference was a cache hit (`processed` or `passthrough`) are kept, and only for a body seen
/// before: a stream of distinct payloads costs one hash each.
final class ResponseMemo: Sendable {
    struct Key: Hashable, Sendable {
        var options: String
        var body: [UInt8]

        /// The body hashed as one run of bytes (an array's own hashing feeds them one at a time).
        func hash(into hasher: inout Hasher) {
            hasher.combine(options)
            hasher.combine(body.count)
            body.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    struct Entry: Sendable {
        /// The outcome as a cache hit, for metrics and the outcome header (total set per answer).
        var outcome: Outcome
        /// `{"payload":…,"outcome":{…"total":` and the rest after the total.
        var head: [UInt8]
        var tail: [UInt8]
        /// An answer with a total between `head` and `tail`; false: a payload, all in `head`.
        var timed = true
        /// Stored files (name, bytes) the answer refers to.
        var files: [(name: String, bytes: Int64)]
        /// Past this the answer is made again: the media's freshness ends, or the index is to be
        /// read again (another node may have renewed or purged the entries).
        var expires: ContinuousClock.Instant
        /// Until this the files are not checked again.
        var checkedUntil = ContinuousClock.Instant.now
        var size: Int { head.count + tail.count + 2 * 1024 }
    }

    /// Bytes of answers and bodies kept at most; past that the least recently used answers go (0: none kept).
    let byteLimit: Int
    private let entries: Locked<LRUCache<Key, Entry>>
    private let answered = Locked(0)
    /// Hashes of bodies answered once from the cache (the 65,536 most recently seen).
    private let seen = Locked(LRUCache<Int, Bool>(budget: 65_536))

    /// Answers given from the memo so far.
    var answers: Int { answered.withLock { $0 } }

    /// How long an answer is kept at most (the index cache's TTL).
    let memoryTTL: Duration

    init(byteLimit: Int = 32 * 1024 * 1024, memoryTTL: Duration = .seconds(60)) {
        self.byteLimit = byteLimit
        self.memoryTTL = memoryTTL
        entries = Locked(LRUCache(budget: byteLimit))
    }

    /// The kept answer for `key` with `total` milliseconds, if its files all still look whole in `store`.
    func answer(_ key: Key, total: Double, store: MediaStore) -> (bytes: [UInt8], outcome: Outcome)? {
        guard let entry = entry(key, store: store), entry.timed else { return nil }
        var outcome = entry.outcome
        outcome.timingsMs.total = total
        return (entry.head + JSONValue.number(total).serialized() + entry.tail, outcome)
    }

    /// The kept rewritten payload for `key` (see `keepPayload`), if its files all still look whole.
    func payload(_ key: Key, store: MediaStore) -> (bytes: [UInt8], outcome: Outcome)? {
        guard let entry = entry(key, store: store), !entry.timed else { return nil }
        return (entry.head, entry.outcome)
    }

    /// The entry for `key`, its files checked at most every `checkEvery` (a campaign repeats a
    /// body thousands of times a second; a file's `stat` is most of the memo's cost).
    private func entry(_ key: Key, store: MediaStore) -> Entry? {
        let now = ContinuousClock.now
        guard let entry = entries.withLock({ $0.value(forKey: key) }) else { return nil }
        guard now < entry.expires,
            now < entry.checkedUntil || entry.files.allSatisfy({ store.looksIntact($0.name, bytes: $0.bytes) })
        else {
            entries.withLock { _ = $0.removeValue(forKey: key) }
            return nil
        }
        if now >= entry.checkedUntil {
            entries.withLock { _ = $0.update(key) { $0.checkedUntil = now + Self.checkEvery } }
        }
        answered.withLock { $0 += 1 }
        return entry
    }

    /// How long the files of an answer are taken as whole once checked: a quarter of a second.
    static let checkEvery: Duration = .milliseconds(250)

    /// The encoded answer for `result` (with its total) when every media reference came from
    /// the cache, kept for the next identical request if this body was seen before; nil when
    /// the answer is not one to keep (encode it as usual).
    func keep(_ key: Key, result: PipelineResult) -> [UInt8]? {
        guard keepable(key, result: result) else { return nil }
        let outcome = result.outcome
        var template = outcome
        let total = outcome.timingsMs.total
        template.timingsMs = StageTimings()
        template.timingsMs.total = Self.sentinel
        let encoded = resultJSON(payload: result.bytes, outcome: template) + [0x0A]
        guard let range = Self.range(of: Array(String(Self.sentinel).utf8), in: encoded) else { return nil }
        let entry = Entry(
            outcome: template, head: Array(encoded[..<range.lowerBound]), tail: Array(encoded[range.upperBound...]),
            files: Self.files(of: outcome),
            expires: .now + lifetime(of: result))
        entries.withLock { _ = $0.setValue(entry, forKey: key, cost: entry.size + key.body.count) }
        return entry.head + JSONValue.number(total).serialized() + entry.tail
    }

    /// The rewritten payload of `result`, kept for the next identical push as `keep` keeps
    /// answers; nil when it is not one to keep.
    func keepPayload(_ key: Key, result: PipelineResult) -> [UInt8]? {
        guard keepable(key, result: result) else { return nil }
        var template = result.outcome
        template.timingsMs = StageTimings()
        let entry = Entry(
            outcome: template, head: result.bytes, tail: [], timed: false, files: Self.files(of: result.outcome),
            expires: .now + lifetime(of: result))
        entries.withLock { _ = $0.setValue(entry, forKey: key, cost: entry.size + key.body.count) }
        return result.bytes
    }

    /// Whether every media reference of `result` came from the cache and its body was seen before.
    private func keepable(_ key: Key, result: PipelineResult) -> Bool {
        guard byteLimit > 0 else { return false }
        let outcome = result.outcome
        let media = outcome.media ?? []
        guard outcome.cacheHit == true, !media.isEmpty,
            media.allSatisfy({ $0.cacheHit == true && ($0.status == .processed || $0.status == .passthrough) })
        else { return false }
        let fingerprint = key.hashValue
        return seen.withLock { seen in
            if seen.value(forKey: fingerprint) != nil { return true }
            seen.setValue(true, forKey: fingerprint)
            return false
        }
    }

    /// Stored files (name, bytes) an outcome refers to.
    private static func files(of outcome: Outcome) -> [(name: String, bytes: Int64)] {
        (outcome.media ?? []).flatMap { [$0.attachment, $0.thumbnail, $0.icon] }.compactMap { $0 }
            .compactMap { file in file.url.split(separator: "/").last.map { (name: String($0), bytes: file.bytes) } }
    }

    /// How long an answer for `result` is kept: the memory TTL, or less when the media's freshness ends sooner.
    private func lifetime(of result: PipelineResult) -> Duration {
        guard let freshUntil = result.freshUntil else { return memoryTTL }
        return min(memoryTTL, .milliseconds(Int64((Double(freshUntil) - Date().timeIntervalSince1970) * 1000)))
    }

    /// A total no real answer has, to find where the total goes in the encoded answer.
    static let sentinel = 987_654_321.25

    /// The only occurrence of `needle` in `haystack` (nil when absent or repeated).
    static func range(of needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
        guard needle.count <= haystack.count else { return nil }
        var found: Range<Int>?
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<start + needle.count].elementsEqual(needle) {
                guard found == nil else { return nil }
                found = start..<start + needle.count
            }
        }
        return found
    }
}
