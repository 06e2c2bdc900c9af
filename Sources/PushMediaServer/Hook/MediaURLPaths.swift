import CoreMetrics
import HTTPTypes
import PushMedia

/// Media URL paths asked before, the most recent within 4 MiB of paths: a campaign's URL is
/// asked by every phone. Each path is parsed once (the options, the source, its checks, the file
/// names), and the answer last given for it from the cache is kept for a second (`recheck`):
/// within that second, under the same settings (`LiveSettings.Values.generation`: keys, salts and
/// the allow-list SIGHUP may change), the route gives it again without checking the signature or
/// asking the pipeline, whose every step would decide the same. After it, the next request takes
/// the whole way again (the signature against the keys in force, the pipeline's lookup and its
/// one freshness rule) and keeps what it answers: a purge or a stale entry is seen within a
/// second, a reload at once. Thread-safe.
final class MediaURLPaths: Sendable {
    struct Names: Sendable {
        /// `Content-Disposition`'s name for the format asked, if the URL asks one.
        var asked: String?
        /// The name of the thumbnail answered in its place (a JPEG).
        var preview: String
    }

    /// A stored file's answer to a media URL: the file, the headers besides its own and its
    /// `Cache-Control` (whose lifetime is counted down per answer), the counter it counts in.
    struct Answer: Sendable {
        var file: String
        var headers: HTTPFields
        /// The entry's freshness (`MediaURLRoutes.lifetime`).
        var freshUntil: Int64?
        var counted: CoreMetrics.Counter
    }

    private struct Kept {
        var answer: Answer
        /// The settings it was checked under.
        var generation: Int
        var until: ContinuousClock.Instant
    }

    private struct Slot {
        var url: MediaURL
        var names: Names
        var kept: Kept?
    }

    /// How long an answer is given again before the path is checked and resolved anew.
    static let recheck: Duration = .seconds(1)
    private let slots = Locked(LRUCache<String, Slot>(budget: 4 << 20))
    /// Whether answers are kept (`--memo-bytes` 0 keeps none; paths are parsed once all the same).
    let keepsAnswers: Bool

    init(keepsAnswers: Bool = true) { self.keepsAnswers = keepsAnswers }

    /// The answer kept for `path`, if it was kept under the settings of `generation` less than
    /// `recheck` ago.
    func answer(_ path: String, generation: Int, now: ContinuousClock.Instant) -> Answer? {
        // Read in place: copying the slot out would copy its parsed URL too.
        slots.withLock { slots in
            slots.update(path) { slot in
                guard let kept = slot.kept, kept.generation == generation, now < kept.until else { return nil }
                return kept.answer
            } ?? nil
        }
    }

    /// `path` as parsed before, with its file names.
    func parsed(_ path: String) -> (MediaURL, Names)? {
        slots.withLock { slots in slots.value(forKey: path).map { ($0.url, $0.names) } }
    }

    func remember(_ path: String, url: MediaURL, names: Names) {
        // A path's cost: its bytes, the source's (held twice: as written and in its parts), an answer, the rest.
        let cost = path.utf8.count + 2 * url.source.utf8.count + 768
        slots.withLock { _ = $0.setValue(Slot(url: url, names: names), forKey: path, cost: cost) }
    }

    /// Keeps `answer` for `path` (parsed and remembered before), checked under `generation` at `now`.
    func keep(_ path: String, answer: Answer, generation: Int, now: ContinuousClock.Instant) {
        guard keepsAnswers else { return }
        slots.withLock { slots in
            _ = slots.update(path) { $0.kept = Kept(answer: answer, generation: generation, until: now + Self.recheck) }
        }
    }
}
