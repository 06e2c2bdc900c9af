import Foundation
import NIOCore
import PushMedia

/// Recently served media files of a local store, in memory, least recently used out first, up to
/// `limit` bytes. Stored files never change under their name (it is their content's hash), but
/// one can be removed, truncated or replaced behind the store's back: every answer checks the
/// file's identity on disk (device, inode, size, modification time, from the `stat` the route
/// makes anyway) and a cached copy that no longer matches is dropped. Each version of a file is
/// hashed once before it is first served (kept files when they are read, larger ones apart), so
/// bytes that are not what the name says are never served. Thread-safe.
final class MediaMemory: Sendable {
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
        var identity: Identity
        var bytes: ByteBuffer
        var used: UInt64
    }

    private struct State {
        var slots: [String: Slot] = [:]
        var total = 0
        var clock: UInt64 = 0
        /// Files too large to keep whose content was found to match their name, by version.
        var verified: [String: Identity] = [:]
    }

    /// Files larger than this are always read from disk in chunks.
    static let maxFileBytes = 4 << 20
    let limit: Int
    private let state = Locked(State())

    init(limit: Int64) {
        self.limit = Int(clamping: max(0, limit))
    }

    /// Whether a file of this size is kept.
    func keeps(size: Int) -> Bool { limit > 0 && size <= Self.maxFileBytes && size <= limit }

    /// The cached bytes of `name` when they are those of the file `identity` describes.
    func bytes(_ name: String, identity: Identity) -> ByteBuffer? {
        state.withLock { state in
            guard let slot = state.slots[name] else { return nil }
            guard slot.identity == identity else {
                state.total -= slot.bytes.readableBytes
                state.slots[name] = nil
                return nil
            }
            state.clock += 1
            state.slots[name]?.used = state.clock
            return slot.bytes
        }
    }

    /// Keeps `bytes` as `name`'s content, evicting the least recently used files past the limit.
    func keep(_ name: String, identity: Identity, bytes: ByteBuffer) {
        guard keeps(size: bytes.readableBytes) else { return }
        state.withLock { state in
            if let old = state.slots[name] { state.total -= old.bytes.readableBytes }
            state.clock += 1
            state.slots[name] = Slot(identity: identity, bytes: bytes, used: state.clock)
            state.total += bytes.readableBytes
            guard state.total > limit else { return }
            // Evict down to 90 % of the limit at once, so that eviction (a sort) is rare.
            for (victim, slot) in state.slots.sorted(by: { $0.value.used < $1.value.used }) {
                guard state.total > limit * 9 / 10 else { break }
                state.total -= slot.bytes.readableBytes
                state.slots[victim] = nil
            }
        }
    }

    /// Whether this version of a file too large to keep was already found to hold what its name says.
    func isVerified(_ name: String, identity: Identity) -> Bool {
        state.withLock { $0.verified[name] == identity }
    }

    /// Records that this version of `name` holds what its name says (at most 10,000 remembered).
    func markVerified(_ name: String, identity: Identity) {
        state.withLock { state in
            if state.verified.count >= 10_000 { state.verified.removeAll(keepingCapacity: true) }
            state.verified[name] = identity
        }
    }

    /// Bytes held now.
    var total: Int { state.withLock { $0.total } }
}
