// What the tests read of the library's insides, and nothing else does.

import Foundation

@testable import PushMedia

extension MediaStore {
    /// Work files of this process currently present.
    func temporaryFiles() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: workspace)) ?? []
    }
}

extension BlockingExecutor {
    /// Threads running now, busy or idle (they end after `idleTimeout` without work).
    var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }
}

extension Pipeline {
    /// The result at once when `begin` needs no job for `payload` (a campaign's payloads after its
    /// job, among others); nil when one is needed.
    func processRemembered(_ payload: JSONObject, context: PayloadContext, sizeAtMost: Int?) -> PipelineResult? {
        if case let .done(result) = begin(payload, context: context, sizeAtMost: sizeAtMost) { return result }
        return nil
    }
}
