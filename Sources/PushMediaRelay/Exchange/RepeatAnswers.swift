import Foundation
import NIOCore
import PushMedia

/// Answers to repeated `/v1/process` requests and rewritten payloads of repeated relayed pushes
/// (kept here, beside the relays, and used by the hook too).
/// A campaign tool sends the same payload for every device; once its media came from the
/// cache, the answer to the same body under the same options is the same bytes except for the
/// time taken (a relayed push's payload: the same bytes). Those answers are kept ready, the
/// answer's JSON split where its total goes (`Outcome.serializedAroundTotal`), and served
/// without parsing, rewriting or encoding again while the cache entries they were made from are
/// still remembered fresh with the same files: the pipeline's own check
/// (`Pipeline.stillRemembered`, the store's one interval), not one of the memo's, asked at most
/// once a second per kept answer (`recheck`). Only answers
/// whose every media reference was a cache hit (`processed` or `passthrough`) are kept, and only
/// for a body seen before: a stream of distinct payloads costs one hash each.
package final class RepeatAnswers: Sendable {
    package struct Key: Hashable, Sendable {
        let options: String
        let body: ByteBuffer
        /// The options and the body hashed once, as one run of bytes (an array's own hashing feeds
        /// them one at a time), for every lookup of the key.
        let fingerprint: Int

        init(options: String, body: ByteBuffer) {
            self.options = options
            self.body = body
            var hasher = Hasher()
            hasher.combine(options)
            hasher.combine(body.readableBytes)
            body.withUnsafeReadableBytes { hasher.combine(bytes: $0) }
            fingerprint = hasher.finalize()
        }

        package func hash(into hasher: inout Hasher) { hasher.combine(fingerprint) }

        package static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.fingerprint == rhs.fingerprint && lhs.options == rhs.options && lhs.body == rhs.body
        }
    }

    /// Which door an answer is for, and what it depends on besides the body.
    package enum Door: Sendable {
        /// `/v1/process` with its options.
        case process(onReject: String?, vendor: String?, profile: String?)
        /// A relayed APNs push.
        case apns
        /// A relayed FCM message, keyed on its bytes without its target.
        case fcm
        /// A relayed FCM message whose target only a parse found: keyed on it serialized without it.
        case fcmParsed
    }

    /// The one place a key is made: `body` as answered through `door` with the media's `baseURL`.
    package static func key(_ door: Door, baseURL: String, body: [UInt8]) -> Key {
        key(door, baseURL: baseURL, body: ByteBuffer(bytes: body))
    }

    /// The same, for a body already in a buffer (a relayed request's: not copied).
    package static func key(_ door: Door, baseURL: String, body: ByteBuffer) -> Key {
        let options =
            switch door {
            case let .process(onReject, vendor, profile): "\(onReject ?? "-")|\(vendor ?? "-")|\(profile ?? "-")|"
            case .apns: "apns|"
            case .fcm: "fcm|"
            case .fcmParsed: "fcm-parsed|"
            }
        return Key(options: options + baseURL, body: body)
    }

    struct Entry: Sendable {
        /// The outcome as a cache hit, for metrics and the outcome header (total set per answer).
        var outcome: Outcome
        /// `{"payload":…,"outcome":{…"total":` and the rest after the total.
        var head: [UInt8]
        var tail: [UInt8]
        /// An answer with a total between `head` and `tail`; false: a payload, all in `head`.
        var timed = true
        /// A payload's bytes as a buffer, shared by every push that forwards it.
        var buffer: ByteBuffer?
        /// The cache entries the answer was made from.
        var used: [UsedEntry]
        /// Until when they are taken as still remembered without asking the pipeline again.
        var checkedUntil = ContinuousClock.Instant.now - .seconds(1)
        var size: Int { head.count + tail.count + 2 * 1024 }
    }

    /// Bytes of answers and bodies kept at most; past that the least recently used answers go (0: none kept).
    let byteLimit: Int
    private struct State {
        var entries: LRUCache<Key, Entry>
        var answered = 0
    }
    private let state: Locked<State>
    /// How long an entry's sources are taken as remembered once checked: a second (the store's
    /// own intervals are minutes).
    static let recheck: Duration = .seconds(1)
    /// Hashes of bodies answered once from the cache: a table of 65,536 slots, each the last hash
    /// that fell in it (a stream of distinct bodies costs no allocation, and the table no more).
    private let seen = Locked([Int](repeating: 0, count: 1 << 16))

    /// Answers given from the memo so far.
    package var given: Int { state.withLock { $0.answered } }

    package init(byteLimit: Int = 32 * 1024 * 1024) {
        self.byteLimit = byteLimit
        state = Locked(State(entries: LRUCache(budget: byteLimit)))
    }

    /// The kept answer for `key` with `total` milliseconds, if it still holds.
    package func answer(_ key: Key, total: Double, pipeline: Pipeline) -> (bytes: [UInt8], outcome: Outcome)? {
        guard let entry = entry(key, pipeline: pipeline), entry.timed else { return nil }
        var outcome = entry.outcome
        outcome.timingsMs.total = total
        return (entry.head + JSONValue.number(total).serialized() + entry.tail, outcome)
    }

    /// The kept rewritten payload for `key` (see `keepPayload`), if it still holds: its bytes,
    /// as a buffer shared by every push that forwards them as they are.
    func payload(_ key: Key, pipeline: Pipeline) -> (bytes: [UInt8], buffer: ByteBuffer, outcome: Outcome)? {
        guard let entry = entry(key, pipeline: pipeline), !entry.timed, let buffer = entry.buffer else { return nil }
        return (entry.head, buffer, entry.outcome)
    }

    /// The entry for `key` while the cache entries it was made from are remembered fresh with
    /// the same files; dropped otherwise.
    private func entry(_ key: Key, pipeline: Pipeline) -> Entry? {
        let now = ContinuousClock.now
        let found: Entry? = state.withLock { state in
            guard let entry = state.entries.value(forKey: key) else { return nil }
            if now < entry.checkedUntil { state.answered += 1 }
            return entry
        }
        guard let entry = found else { return nil }
        if now < entry.checkedUntil { return entry }
        // Asked at most once a second per entry: a campaign's pushes cost no lookup each.
        guard pipeline.stillRemembered(entry.used) else {
            state.withLock { _ = $0.entries.removeValue(forKey: key) }
            return nil
        }
        state.withLock { state in
            state.answered += 1
            _ = state.entries.update(key) { $0.checkedUntil = now + Self.recheck }
        }
        return entry
    }

    /// The encoded answer for `result` (with its total) when every media reference came from
    /// the cache, kept for the next identical request if this body was seen before; nil when
    /// the answer is not one to keep (encode it as usual).
    package func keep(_ key: Key, result: PipelineResult) -> [UInt8]? {
        guard keepable(key, result: result) else { return nil }
        var template = result.outcome
        let total = template.timingsMs.total
        template.timingsMs = StageTimings()
        let (outcomeHead, outcomeTail) = template.serializedAroundTotal()
        let entry = Entry(
            outcome: template,
            head: Array(#"{"payload":"#.utf8) + result.bytes + Array(#","outcome":"#.utf8) + outcomeHead,
            tail: outcomeTail + Array("}\n".utf8), used: result.used)
        state.withLock { _ = $0.entries.setValue(entry, forKey: key, cost: entry.size + key.body.readableBytes) }
        return entry.head + JSONValue.number(total).serialized() + entry.tail
    }

    /// The rewritten payload of `result`, kept for the next identical push as `keep` keeps
    /// answers; nil when it is not one to keep.
    func keepPayload(_ key: Key, result: PipelineResult) -> [UInt8]? {
        guard keepable(key, result: result) else { return nil }
        var template = result.outcome
        template.timingsMs = StageTimings()
        let entry = Entry(
            outcome: template, head: result.bytes, tail: [], timed: false, buffer: ByteBuffer(bytes: result.bytes),
            used: result.used)
        state.withLock { _ = $0.entries.setValue(entry, forKey: key, cost: entry.size + key.body.readableBytes) }
        return result.bytes
    }

    /// Whether every media reference of `result` came from the cache and its body was seen before.
    private func keepable(_ key: Key, result: PipelineResult) -> Bool {
        guard byteLimit > 0 else { return false }
        let outcome = result.outcome
        let media = outcome.media ?? []
        guard outcome.cacheHit == true, !media.isEmpty, result.used.count == media.count,
            media.allSatisfy({ $0.cacheHit == true && ($0.status == .processed || $0.status == .passthrough) })
        else { return false }
        let fingerprint = key.fingerprint
        let slot = fingerprint & 0xFFFF
        return seen.withLock { seen in
            if seen[slot] == fingerprint { return true }
            seen[slot] = fingerprint
            return false
        }
    }
}
