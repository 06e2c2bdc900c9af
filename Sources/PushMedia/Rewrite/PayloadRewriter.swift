/// Rewrite: puts each attachment URL where the payload's vendor keeps it, fills the vendor's type
/// fields from the sniffed bytes, sets `aps.mutable-content` to 1 for iOS attachments, adds the
/// `pushmedia` descriptor, and keeps every other key and value as it was, within APNs' size limit.
public enum PayloadRewriter {
    /// APNs' limit for a (non-VoIP) payload, in bytes of JSON (FCM's limit for a message is the same).
    public static let apnsLimit = 4096
    /// Key of the descriptor, in the APNs payload.
    public static let descriptorKey = "pushmedia"

    public enum Media: Sendable, Equatable {
        /// Put this URL in place of the media reference.
        case replace(with: String)
        /// Leave the media reference as it is.
        case keep
        /// Remove the media reference (rejected media: the phone shows the text at once).
        case remove
    }

    /// What to do at one media reference.
    public struct Edit: Sendable, Equatable {
        public var slot: MediaSlot
        public var media: Media
        /// The vendor type field's value (from the sniffed bytes); nil leaves the field alone.
        public var typeValue: String?
        /// The icon URL, written at `slot.iconTarget`.
        public var icon: String?
        /// A computed clipping rectangle, written in the vendor's own options when it has a place
        /// for one and the payload gave none.
        public var clip: ClipRect?

        public init(slot: MediaSlot, media: Media, typeValue: String? = nil, icon: String? = nil, clip: ClipRect? = nil)
        {
            self.slot = slot
            self.media = media
            self.typeValue = typeValue
            self.icon = icon
            self.clip = clip
        }
    }

    /// The rewritten payload and what had to be trimmed.
    public struct Rewritten: Sendable {
        public var payload: JSONObject
        public var bytes: [UInt8]
        public var droppedFields: [String]
        /// What a template's fallback or renumbering changed (`Templates.finish`).
        public var notes: [String] = []
    }

    /// `descriptor` with its items where the rewritten payload has them: the item of a removed
    /// reference is gone, and one after a removed array element (a slider's item, an Airship
    /// URL) has the index it now has, so the phone finds each item at its path.
    static func placed(_ descriptor: Descriptor, edits: [Edit], removals: [JSONPath]) -> Descriptor {
        guard let items = descriptor.items else { return descriptor }
        var targets: [String: JSONPath] = [:]
        var removed: Set<String> = []
        for edit in edits {
            let name = edit.slot.target.description
            targets[name] = edit.slot.target
            if edit.media == .remove { removed.insert(name) }
        }
        let gone = Set(removals)
        let kept = items.compactMap { item -> Descriptor.Item? in
            guard !removed.contains(item.path) else { return nil }
            guard let target = targets[item.path] else { return item }
            var item = item
            item.path = shifted(target, by: gone).description
            return item
        }
        var placed = descriptor
        placed.items = kept.count > 1 ? kept : nil
        return placed
    }

    /// `path` once the array elements at `removals` are gone: each index lowered by the removed
    /// elements before it in the same array (all paths as they were before the removals).
    static func shifted(_ path: JSONPath, by removals: Set<JSONPath>) -> JSONPath {
        var steps = path.steps
        for removal in removals {
            let depth = removal.steps.count - 1
            guard depth >= 0, depth < path.steps.count, case let .index(removed) = removal.steps[depth],
                case let .index(index) = path.steps[depth], removed < index,
                Array(path.steps.prefix(depth)) == Array(removal.steps.prefix(depth)),
                case let .index(current) = steps[depth]
            else { continue }
            steps[depth] = .index(current - 1)
        }
        return JSONPath(steps)
    }

    /// Applies `edits` in the shape of `vendor`. The descriptor goes into the APNs payload (the
    /// top level, or `message.apns.payload` of an FCM message). Returns nil when even the smallest
    /// form (no descriptor) exceeds `limit`.
    public static func rewrite(
        _ payload: JSONObject, edits: [Edit], vendor: Vendor, descriptor: Descriptor?,
        limit: Int = apnsLimit
    ) -> Rewritten? {
        var base = payload
        var removals: [JSONPath] = []
        for edit in edits {
            switch edit.media {
            case let .replace(url):
                base.set(.string(url), at: edit.slot.target)
            case .keep:
                break
            case .remove:
                removals += edit.slot.removals
                continue
            }
            if let field = edit.slot.typeField, let value = edit.typeValue { base.set(.string(value), at: field.path) }
            if let target = edit.slot.iconTarget, let icon = edit.icon { base.set(.string(icon), at: target) }
            if let clip = edit.clip, let options = edit.slot.hintsPath,
                base[path: options.appending(key: "crop")] == nil
            {
                base.set(
                    .object(
                        JSONObject([
                            ("x", .number(clip.x)), ("y", .number(clip.y)), ("width", .number(clip.width)),
                            ("height", .number(clip.height)),
                        ])), at: options.appending(key: "crop"))
            }
        }
        // Array elements are removed from the highest index down, so earlier indexes stay valid.
        for path in Set(removals).sorted(by: removalOrder) { base.set(nil, at: path) }
        // A container emptied by the removals goes too (OneSignal's `att` with every entry rejected).
        for parent in Set(removals.map(\.parent)).sorted(by: removalOrder) where !parent.steps.isEmpty {
            switch base[path: parent] {
            case .object(let object)? where object.count == 0: base.set(nil, at: parent)
            case .array(let array)? where array.isEmpty: base.set(nil, at: parent)
            default: break
            }
        }

        let notes = Templates.finish(&base, edits: edits)
        let descriptor = descriptor.map { placed($0, edits: edits, removals: removals) }

        let aps = vendor.apsPath(in: payload)
        let iosReplaced = edits.contains { edit in
            if case .replace = edit.media { return edit.slot.platform.id == PlatformProfile.ios.id }
            return false
        }
        if iosReplaced, base[path: aps]?.objectValue != nil || vendor == .fcm {
            if base[path: aps.appending(key: "mutable-content")]?.intValue != 1 {
                base.set(.number("1"), at: aps.appending(key: "mutable-content"))
            }
        }
        let parent = vendor.descriptorParent(in: payload)
        let descriptorPath = parent.appending(key: descriptorKey)
        // Serialized without counting first (one walk of the payload when it fits), into room
        // that grows at most twice for an APNs-sized payload and is never far above its size.
        func fitting(_ candidate: JSONObject) -> [UInt8]? {
            let bytes = JSONValue.object(candidate).serialized(reserving: min(limit, 1024))
            return bytes.count <= limit ? bytes : nil
        }
        guard let descriptor else {
            return fitting(base).map { Rewritten(payload: base, bytes: $0, droppedFields: [], notes: notes) }
        }
        let full = descriptor.json(omitting: [])
        var candidate = base
        candidate.set(full, at: descriptorPath)
        if let bytes = fitting(candidate) {
            return Rewritten(payload: candidate, bytes: bytes, droppedFields: [], notes: notes)
        }
        // A descriptor only adds bytes: without room for the payload with none, there is none for it.
        var bare = base
        bare.set(nil, at: descriptorPath)
        guard JSONValue.object(bare).compactByteCount <= limit else { return nil }
        var dropped: [String] = []
        let present = full.objectValue?.keys ?? []
        for field in Descriptor.optionalFields where present.contains(field) {
            dropped.append(field)
            candidate = base
            candidate.set(descriptor.json(omitting: Set(dropped)), at: descriptorPath)
            if let bytes = fitting(candidate) {
                return Rewritten(payload: candidate, bytes: bytes, droppedFields: dropped, notes: notes)
            }
        }
        // No room for a descriptor: an input's own `pushmedia` key would describe the wrong attachment.
        return fitting(bare).map {
            Rewritten(payload: bare, bytes: $0, droppedFields: dropped + ["pushmedia"], notes: notes)
        }
    }

    /// Deeper and higher-indexed paths first.
    private static func removalOrder(_ a: JSONPath, _ b: JSONPath) -> Bool {
        for (x, y) in zip(a.steps, b.steps) where x != y {
            switch (x, y) {
            case let (.index(i), .index(j)): return i > j
            case let (.key(k), .key(l)): return k < l
            case (.index, .key), (.embedded, _): return true
            case (.key, .index), (_, .embedded): return false
            }
        }
        return a.steps.count > b.steps.count
    }
}

extension JSONValue {
    /// A JSON number for `value`, shortest round-trip spelling (`0.25`, `1`).
    public static func number(_ value: Double) -> JSONValue {
        value == value.rounded() && abs(value) < 1e15 ? .number(String(Int64(value))) : .number(String(value))
    }
}
