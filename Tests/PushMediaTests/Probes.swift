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
