import Foundation
import PushMediaNSE
import Testing

@Suite("PushMediaNSE exactly once")
struct DeliverOnceTests {
    /// Eight threads race to deliver, a thousand times over: each guard calls its handler once,
    /// with one of the values offered.
    @Test func oneCallUnderConcurrency() {
        for _ in 0..<1000 {
            let calls = Recorder<Int>()
            let once = DeliverOnce<Int> { calls.add($0) }
            let accepted = Recorder<Int>()
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                if once(index) { accepted.add(index) }
            }
            #expect(calls.values.count == 1)
            #expect(accepted.values == calls.values)
            #expect(once.hasDelivered)
        }
    }

    @Test func discardedGuardCallsNothing() {
        let calls = Recorder<Int>()
        let once = DeliverOnce<Int> { calls.add($0) }
        once.discard()
        #expect(once(1) == false)
        #expect(calls.values.isEmpty)
    }

    @Test func theHandlerMayCallBackIn() {
        // A handler that delivers again (as a content handler reached twice would) does not
        // deadlock and is not called twice.
        let calls = Recorder<Int>()
        var once: DeliverOnce<Int>!
        once = DeliverOnce<Int> { value in
            calls.add(value)
            _ = once(value + 1)
        }
        #expect(once(1))
        #expect(calls.values == [1])
    }
}
