import Foundation
import NIOCore
import PushMedia

/// Recently served media files, in memory, least recently used out first, up to `limit` bytes.
/// Stored files never change under their name (it is their content's hash), but one can be
/// removed, truncated or replaced behind the store's back. A local store's: every answer checks
/// the file's identity on disk (device, inode, size, modification time, from the `stat` the route
/// makes anyway) and a cached copy that no longer matches is dropped. An object store's: a copy
/// is answered for `objectLifetime` after it was read (a file removed from the bucket, by
/// retention or a purge, is served at most that long). Each version of a file is hashed once
/// before it is first served (kept files when they are read, larger local ones apart), so bytes
/// that are not what the name says are never served. Thread-safe.
final class ServedFiles: Sendable {
    /// What identifies one version of a file on disk.
    struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modifiedSeconds = info.st_mtim.tv_sec
            modifiedNanoseconds = info.st_mtim.tv_nsec
        }
    }

    private struct Slot {
        /// A local file's version; nil for an object store's file.
        var identity: Identity?
        var bytes: ByteBuffer
        var kept: ContinuousClock.Instant
    }

    private struct State {
        /// Kept files by name, their sizes counted against `limit`.
        var files: LRUCache<String, Slot>
        /// Files too large to keep whose content was found to match their name, by version.
        var verified = LRUCache<String, Identity>(budget: ServedFiles.maxVerified)
        /// An object store's files found too large to keep, so that they are streamed at once.
        var large = LRUCache<String, Bool>(budget: ServedFiles.maxVerified)
    }

    /// Files larger than this are always read from disk in chunks.
    static let maxFileBytes = 4 << 20
    /// Versions of files too large to keep remembered as verified.
    static let maxVerified = 10_000
    /// How long an object store's file is answered from memory after it was read.
    static let objectLifetime: Duration = .seconds(60)
    let limit: Int
    private let state: Locked<State>

    init(limit: Int64) {
        self.limit = Int(clamping: max(0, limit))
        state = Locked(State(files: LRUCache(budget: self.limit)))
    }

    /// Whether a file of this size is kept.
    func keeps(size: Int) -> Bool { limit > 0 && size <= Self.maxFileBytes && size <= limit }

    /// The cached bytes of `name` when they are those of the file `identity` describes.
    func bytes(_ name: String, identity: Identity) -> ByteBuffer? {
        state.withLock { state in
            guard let slot = state.files.value(forKey: name) else { return nil }
            guard slot.identity == .some(identity) else {
                state.files.removeValue(forKey: name)
                return nil
            }
            return slot.bytes
        }
    }

    /// The bytes of an object store's file `name`, read less than `objectLifetime` ago.
    func object(_ name: String, now: ContinuousClock.Instant = .now) -> ByteBuffer? {
        state.withLock { state in
            guard let slot = state.files.value(forKey: name) else { return nil }
            guard slot.identity == nil, now - slot.kept < Self.objectLifetime else {
                state.files.removeValue(forKey: name)
                return nil
            }
            return slot.bytes
        }
    }

    /// Keeps `bytes` as `name`'s content (`identity`: the local file's version; nil for an object
    /// store's file), evicting the least recently used files past the limit.
    func keep(_ name: String, identity: Identity?, bytes: ByteBuffer) {
        guard keeps(size: bytes.readableBytes) else { return }
        let slot = Slot(identity: identity, bytes: bytes, kept: .now)
        state.withLock { _ = $0.files.setValue(slot, forKey: name, cost: bytes.readableBytes) }
    }

    /// Whether an object store's file `name` was found too large to keep.
    func isLarge(_ name: String) -> Bool { state.withLock { $0.large.value(forKey: name) ?? false } }

    /// Records that an object store's file `name` is too large to keep.
    func markLarge(_ name: String) { state.withLock { _ = $0.large.setValue(true, forKey: name) } }

    /// Whether this version of a file too large to keep was already found to hold what its name says.
    func isVerified(_ name: String, identity: Identity) -> Bool {
        state.withLock { $0.verified.value(forKey: name) == identity }
    }

    /// Records that this version of `name` holds what its name says (the 10,000 most recently
    /// used remembered).
    func markVerified(_ name: String, identity: Identity) {
        state.withLock { _ = $0.verified.setValue(identity, forKey: name) }
    }

    /// Bytes held now.
    var total: Int { state.withLock { $0.files.cost } }
}
