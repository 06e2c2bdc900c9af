import Foundation

/// Hands a value to one waiting continuation exactly once: the first `resolve` wins, later
/// calls are ignored. Used to race a job against its deadline.
public final class OnceResolver<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, Never>?
    private var pending: Value?
    private var done = false

    public init() {}

    /// Delivers `value` if nothing was delivered yet. Returns whether this call won.
    @discardableResult
    public func resolve(_ value: Value) -> Bool {
        lock.lock()
        if done {
            lock.unlock()
            return false
        }
        done = true
        if let continuation {
            self.continuation = nil
            lock.unlock()
            continuation.resume(returning: value)
        } else {
            pending = value
            lock.unlock()
        }
        return true
    }

    /// Waits for the value. Call once.
    public func value() async -> Value {
        await withCheckedContinuation { continuation in
            lock.lock()
            if let pending {
                self.pending = nil
                lock.unlock()
                continuation.resume(returning: pending)
            } else {
                self.continuation = continuation
                lock.unlock()
            }
        }
    }
}
