import Foundation
import PushMedia
import Testing

@Suite("Process resources")
struct ProcessResourcesTests {
    /// Every size follows the one rule, from the cores and the configuration.
    @Test(arguments: [1, 3, 16])
    func sizedByTheRule(cores: Int) {
        var config = PushMediaConfig()
        config.decodeMemory = 123_000_000
        let resources = ProcessResources(config: config, cores: cores)
        #expect(resources.cores == cores)
        #expect(resources.cpu.maxThreads == cores)
        #expect(resources.io.maxThreads == 64)
        #expect(resources.mediaReads.maxThreads == 4)
        #expect(resources.store.maxThreads == 2)
        #expect(resources.housekeeping.maxThreads == 1)
        #expect(resources.storeStreams.maxConnections == 512)
        #expect(resources.gate == nil, "no job gate unless --max-jobs is given")
        #expect(resources.transcodeGate == nil)
        #expect(resources.decodeBudget.limit == 123_000_000)
        // No thread starts before there is work.
        #expect(resources.cpu.threadCount == 0 && resources.io.threadCount == 0)
    }

    @Test func gatesAsConfiguredAndAtLeastOneCore() {
        var config = PushMediaConfig()
        config.maxJobs = 5
        config.maxQueuedJobs = 7
        config.maxTranscodes = 2
        let resources = ProcessResources(config: config, cores: 0)
        #expect(resources.cores == 1)
        #expect(resources.cpu.maxThreads == 1)
        #expect(resources.gate?.limit == 5)
        #expect(resources.gate?.queueLimit == 7)
        #expect(resources.transcodeGate?.limit == 2)
    }

    /// Threads start with work, no more than the executor's size however much waits, and end
    /// once idle; work after that starts them again.
    @Test func threadsStartWithWorkAndEndWhenIdle() async throws {
        let resources = ProcessResources(config: PushMediaConfig(), cores: 3, idleTimeout: .milliseconds(200))
        let release = DispatchSemaphore(value: 0)
        let started = Counter()
        let jobs = Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        await resources.cpu.run {
                            started.add()
                            release.wait()
                        }
                    }
                }
            }
        }
        for _ in 0..<200 where started.value < 3 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(started.value == 3, "as many jobs run at once as there are cores")
        #expect(resources.cpu.threadCount == 3)
        #expect(resources.cpu.queued == 7)
        for _ in 0..<10 { release.signal() }
        await jobs.value
        #expect(started.value == 10)
        for _ in 0..<300 where resources.cpu.threadCount > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(resources.cpu.threadCount == 0, "idle threads ended")
        #expect(await resources.cpu.run { resources.cpu.threadCount } == 1, "work starts a thread again")
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func add() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }
}
