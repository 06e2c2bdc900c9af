import Foundation

/// What an origin said about its answer's freshness and how to revalidate it, read from the
/// response headers of a fetch (the last response, after redirects).
public struct OriginValidators: Sendable, Equatable {
    /// `ETag`, sent back as `If-None-Match`.
    public var etag: String?
    /// `Last-Modified`, sent back as `If-Modified-Since`.
    public var lastModified: String?
    public var cacheControl: String?
    public var expires: String?
    public var date: String?
    public var age: String?

    public init(
        etag: String? = nil, lastModified: String? = nil, cacheControl: String? = nil, expires: String? = nil,
        date: String? = nil, age: String? = nil
    ) {
        self.etag = etag
        self.lastModified = lastModified
        self.cacheControl = cacheControl
        self.expires = expires
        self.date = date
        self.age = age
    }

    /// Whether a conditional request can be made.
    public var canRevalidate: Bool { etag != nil || lastModified != nil }

    /// A header value from an untrusted origin, kept only when it is one short printable line
    /// (it is stored in the index and sent back in a request header).
    static func clean(_ value: String?) -> String? {
        guard let value else { return nil }
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 256, trimmed.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return nil
        }
        return trimmed
    }
}

/// How long a fetched source stays fresh before it is revalidated with its origin: the origin's
/// `Cache-Control: s-maxage` / `max-age` (minus `Age`), else `Expires` − `Date`, else 10 % of the
/// time since `Last-Modified` (RFC 9111's heuristic), else the minimum; always within
/// `--min-ttl` … `--max-ttl`. `no-cache`, `no-store` and `private` count as zero, so the minimum.
public struct FreshnessPolicy: Sendable, Equatable {
    public var minimum: Duration
    public var maximum: Duration

    public init(minimum: Duration, maximum: Duration) {
        self.minimum = minimum
        self.maximum = max(minimum, maximum)
    }

    /// Seconds the answer described by `validators`, received at `now`, stays fresh.
    public func lifetime(_ validators: OriginValidators, now: Date) -> TimeInterval {
        let low = Double(minimum.components.seconds)
        let high = Double(maximum.components.seconds)
        return min(high, max(low, originLifetime(validators, now: now) ?? low))
    }

    func originLifetime(_ validators: OriginValidators, now: Date) -> TimeInterval? {
        let age = validators.age.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }.map { max(0, $0) } ?? 0
        if let cacheControl = validators.cacheControl {
            var maxAge: Double?
            var sharedMaxAge: Double?
            for directive in cacheControl.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1).map {
                    $0.trimmingCharacters(in: .whitespaces).lowercased()
                }
                switch parts[0] {
                case "no-cache", "no-store", "private": return 0
                case "max-age" where parts.count == 2:
                    maxAge = Double(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
                case "s-maxage" where parts.count == 2:
                    sharedMaxAge = Double(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
                default: continue
                }
            }
            if let seconds = sharedMaxAge ?? maxAge { return max(0, seconds - age) }
        }
        let served = validators.date.flatMap(Self.parseHTTPDate) ?? now
        if let text = validators.expires {
            // An unparseable Expires (often "0" or "-1") means already expired.
            guard let expires = Self.parseHTTPDate(text) else { return 0 }
            return max(0, expires.timeIntervalSince(served) - age)
        }
        if let modified = validators.lastModified.flatMap(Self.parseHTTPDate), modified < served {
            return served.timeIntervalSince(modified) / 10
        }
        return nil
    }

    /// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form every current server sends.
    static func parseHTTPDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
            let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].firstIndex(
                of: String(parts[2]))
        else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...31).contains(day), (1970...9999).contains(year),
            (0...23).contains(clock[0]), (0...59).contains(clock[1]), (0...60).contains(clock[2])
        else { return nil }
        // Days since 1970-01-01 (civil-from-days inverse, proleptic Gregorian).
        let y = month < 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let monthIndex = (month + 10) % 12
        let dayOfYear = (153 * monthIndex + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: Double(days * 86_400 + clock[0] * 3600 + clock[1] * 60 + clock[2]))
    }
}

extension CacheEntry {
    /// Whole seconds of freshness left at `now` for an entry recorded fresh until `freshUntil`
    /// (seconds since 1970): 0 once stale, and for an entry recorded without freshness. The one
    /// rule behind `isFresh` and the `Cache-Control` lifetime of an answer made from an entry.
    public static func secondsFresh(until freshUntil: Int64?, at now: Date) -> Int64 {
        guard let freshUntil else { return 0 }
        return max(0, freshUntil - Int64(now.timeIntervalSince1970.rounded(.down)))
    }

    /// Whether the entry may be used at `now` without revalidating its source. Entries of local
    /// sources are always fresh; remote ones written before freshness was recorded never are.
    public func isFresh(remote: Bool, now: Date) -> Bool {
        !remote || Self.secondsFresh(until: freshUntil, at: now) > 0
    }
}

extension MediaStore {
    /// The time by the store's clock, which freshness is read against.
    public var now: Date { clock.now }

    /// The entry remembered for `key` (`remembered(key:)`) when it is fresh by the store's clock:
    /// the one freshness decision of an answer from memory (a lookup's first step, `Pipeline.begin`,
    /// an answer kept ready).
    func rememberedFresh(key: String, remote: Bool) -> CacheEntry? {
        guard let entry = remembered(key: key), entry.isFresh(remote: remote, now: clock.now) else { return nil }
        return entry
    }
}
