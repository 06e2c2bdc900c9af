import Foundation

/// Calls a handler at most once, whichever thread gets there first; every later call is
/// ignored. This is what keeps the extension's content handler from being called twice (or
/// never dropped: the first caller always gets through).
public final class DeliverOnce<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var handler: ((Value) -> Void)?

    public init(_ handler: @escaping (Value) -> Void) {
        self.handler = handler
    }

    /// Hands `value` to the handler if nothing was delivered yet; returns whether it did. The
    /// handler runs on the calling thread, outside the lock, and is released afterwards.
    @discardableResult
    public func callAsFunction(_ value: Value) -> Bool {
        lock.lock()
        let handler = self.handler
        self.handler = nil
        lock.unlock()
        guard let handler else { return false }
        handler(value)
        return true
    }

    /// Drops the handler without calling it (what it captured is released).
    public func discard() {
        lock.lock()
        handler = nil
        lock.unlock()
    }

    /// Whether the handler has been called (or is being called), or discarded.
    public var hasDelivered: Bool {
        lock.lock()
        defer { lock.unlock() }
        return handler == nil
    }
}
