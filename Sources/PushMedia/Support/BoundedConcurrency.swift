extension Array where Element: Sendable {
    /// Runs `body` on every element with at most `width` calls in flight, starting them in order,
    /// and hands each result to `onResult` as it finishes (on the calling task, in the order the
    /// calls finish). `body` receives the element's index too.
    public func forEachConcurrently<Output: Sendable>(
        width: Int,
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable (Int, Element) async -> Output,
        onResult: (Int, Output) -> Void
    ) async {
        await withTaskGroup(of: (Int, Output).self, isolation: isolation) { group in
            var next = 0
            func schedule() {
                guard next < count else { return }
                let index = next
                let element = self[index]
                next += 1
                group.addTask { (index, await body(index, element)) }
            }
            for _ in 0..<Swift.max(1, width) { schedule() }
            while let (index, output) = await group.next() {
                onResult(index, output)
                schedule()
            }
        }
    }

    /// The results of `body` on every element, in the elements' order, with at most `width`
    /// calls in flight. `body` receives the element's index too.
    public func mapConcurrently<Output: Sendable>(
        width: Int,
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable (Int, Element) async -> Output
    ) async -> [Output] {
        var results = [Output?](repeating: nil, count: count)
        await forEachConcurrently(width: width, isolation: isolation, body) { index, output in results[index] = output }
        return results.map { $0! }
    }
}
