import PushMedia
import Synchronization
import Tracing

/// A span that ended: plain values, what the exporter encodes.
struct FinishedSpan: Sendable {
    var name: String
    var kind: SpanKind
    var identity: SpanIdentity
    /// The parent span's id; 0 for a trace's first span.
    var parentID: UInt64
    /// Nanoseconds since the epoch.
    var start: UInt64
    var end: UInt64
    var attributes: SpanFields
    var events: [SpanEvent]
    var links: [SpanLink]
    var status: SpanStatus?
}

/// The finished spans waiting for the exporter: a bounded ring that many threads put into and
/// one thread takes from (Dmitry Vyukov's bounded queue: a sequence number per slot, one
/// compare-and-swap per put), so that ending a span takes no lock and allocates nothing. A
/// span that finds the ring full is dropped and counted.
final class SpanRing: @unchecked Sendable {
    let capacity: Int
    private let mask: Int
    private let sequences: UnsafeMutablePointer<Atomic<Int>>
    private let slots: UnsafeMutablePointer<FinishedSpan?>
    /// The next position a producer takes.
    private let tail = Atomic<Int>(0)
    /// The next position the consumer reads: its thread's alone.
    private var head = 0
    /// Spans dropped because the ring was full, since the consumer last took the count.
    private let dropped = Atomic<Int>(0)

    /// A ring of at least `minimum` spans (a power of two).
    init(minimum: Int) {
        var capacity = 1
        while capacity < max(2, minimum) { capacity <<= 1 }
        self.capacity = capacity
        mask = capacity - 1
        sequences = .allocate(capacity: capacity)
        for index in 0..<capacity { (sequences + index).initialize(to: Atomic(index)) }
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
    }

    deinit {
        sequences.deinitialize(count: capacity)
        sequences.deallocate()
        slots.deinitialize(count: capacity)
        slots.deallocate()
    }

    /// Puts `span` in the ring; false (and counted) when the ring is full. `position` is the
    /// span's place in the sequence of all spans put (the exporter is woken every so many).
    func put(_ span: FinishedSpan) -> (stored: Bool, position: Int) {
        var position = tail.load(ordering: .relaxed)
        while true {
            let sequence = sequences[position & mask].load(ordering: .acquiring)
            let difference = sequence &- position
            if difference == 0 {
                let (exchanged, current) = tail.compareExchange(
                    expected: position, desired: position &+ 1, ordering: .relaxed)
                if exchanged { break }
                position = current
            } else if difference < 0 {
                dropped.add(1, ordering: .relaxed)
                return (false, position)
            } else {
                position = tail.load(ordering: .relaxed)
            }
        }
        slots[position & mask] = span
        sequences[position & mask].store(position &+ 1, ordering: .releasing)
        return (true, position)
    }

    /// The oldest span, or nil when the ring is empty. One thread only: the exporter's.
    func take() -> FinishedSpan? {
        let index = head & mask
        guard sequences[index].load(ordering: .acquiring) == head &+ 1 else { return nil }
        let span = slots[index].take()
        sequences[index].store(head &+ capacity, ordering: .releasing)
        head &+= 1
        return span
    }

    /// The spans dropped since the last call (the exporter's thread counts them).
    func takeDropped() -> Int {
        dropped.exchange(0, ordering: .relaxed)
    }
}
