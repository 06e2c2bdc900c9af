import Foundation
import PushMedia
import Tracing

/// A span's place in its trace, carried in the service context of its work: the trace id, the
/// span's own id, whether the trace is sampled, and the caller's `tracestate`. A caller's span,
/// joined from its `traceparent`, is one too: its id is the parent of the first span here.
public struct SpanIdentity: Sendable, Hashable {
    /// The trace id's first and last 8 bytes, big-endian.
    public var traceHigh: UInt64
    public var traceLow: UInt64
    public var spanID: UInt64
    public var sampled: Bool
    /// W3C `tracestate` as the caller sent it (vendors' entries), passed on unchanged.
    public var traceState: String?
    /// A span of this process's tracer (each of them is recorded: the sampler decided before the
    /// trace's first span); false for a caller's, joined from its `traceparent`.
    public var recorded: Bool

    /// The `traceparent` a request made within this span sends: this span as its parent.
    public var traceParent: TraceParent {
        TraceParent(traceHigh: traceHigh, traceLow: traceLow, parentID: spanID, sampled: sampled)
    }
}

enum SpanIdentityKey: ServiceContextKey {
    typealias Value = SpanIdentity
    static let nameOverride: String? = "pushmedia-span"
}

extension ServiceContext {
    /// The span this context's work belongs to (or the caller's, joined from its `traceparent`).
    public var spanIdentity: SpanIdentity? {
        get { self[SpanIdentityKey.self] }
        set { self[SpanIdentityKey.self] = newValue }
    }
}

/// Span and trace ids: xoshiro256** per thread, each thread's state seeded from the system's
/// generator the first time it makes an id. No lock and no shared write: a thread reads and
/// advances its own state.
final class SpanIDs: @unchecked Sendable {
    private var key = pthread_key_t()

    init() {
        pthread_key_create(&key) { state in free(state) }
    }

    deinit { pthread_key_delete(key) }

    /// A non-zero 8-byte id.
    func next() -> UInt64 {
        let state = self.state()
        while true {
            let value = Self.step(state)
            if value != 0 { return value }
        }
    }

    private func state() -> UnsafeMutablePointer<UInt64> {
        if let existing = pthread_getspecific(key) { return existing.assumingMemoryBound(to: UInt64.self) }
        let state = malloc(4 * MemoryLayout<UInt64>.size)!.bindMemory(to: UInt64.self, capacity: 4)
        var system = SystemRandomNumberGenerator()
        repeat {
            for index in 0..<4 { state[index] = system.next() }
        } while state[0] | state[1] | state[2] | state[3] == 0
        pthread_setspecific(key, state)
        return state
    }

    private static func step(_ s: UnsafeMutablePointer<UInt64>) -> UInt64 {
        let result = rotate(s[1] &* 5, 7) &* 9
        let t = s[1] << 17
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotate(s[3], 45)
        return result
    }

    private static func rotate(_ value: UInt64, _ count: UInt64) -> UInt64 {
        (value << count) | (value >> (64 - count))
    }
}
