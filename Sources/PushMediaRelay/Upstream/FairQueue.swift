/// Where a request waits for an upstream stream (`FairQueue`).
struct QueueKey: Hashable, Sendable {
    /// The app: a credential entry's name, or the topic or project of a pass-through request.
    var app: String
    /// The client connection it came on.
    var connection: ObjectIdentifier
    /// 0 (`apns-priority: 10`, the default), 1 (5) or 2 (1).
    var priority: Int

    init(app: String, connection: ObjectIdentifier, priority: Int = 0) {
        self.app = app
        self.connection = connection
        self.priority = min(max(priority, 0), Self.priorities - 1)
    }

    static var priorities: Int { 3 }

    /// The class of an `apns-priority` header: 10 (or none) first, then 5, then 1.
    static func priority(apns value: String?) -> Int {
        switch value {
        case "5": 1
        case "1": 2
        default: 0
        }
    }
}

/// Requests waiting for an upstream stream, served fairly: deficit round robin across apps (a
/// credential entry, or the topic or project of a pass-through request), so that an app with a
/// backlog takes its share and no more; within an app, `apns-priority` 10 before 5 before 1;
/// within a priority, round robin across the client connections the requests came on, so that
/// one connection's backlog does not hold another's request behind it. Each request has a cost
/// (the caller's measure); each app's turn adds `quantum` to what it may spend, and an app whose
/// next request costs more than it has waits for more turns. A small quantum keeps turns short:
/// a request of a light app waits for a few of a heavy one's, not for its backlog. Used on one
/// event loop.
struct FairQueue<Item> {
    static var priorities: Int { QueueKey.priorities }

    /// Items in arrival order, taken from the front.
    private struct Line<Element> {
        private var items: [Element] = []
        private var head = 0

        var isEmpty: Bool { head == items.count }
        var first: Element? { isEmpty ? nil : items[head] }

        mutating func append(_ item: Element) { items.append(item) }

        mutating func removeFirst() -> Element {
            let first = items[head]
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64 && head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            }
            return first
        }
    }

    /// The requests of one priority of an app: each connection's in arrival order, the
    /// connections in turn.
    private struct Lanes {
        var lanes: [ObjectIdentifier: Line<(item: Item, cost: Int)>] = [:]
        var turn = Line<ObjectIdentifier>()

        var isEmpty: Bool { turn.isEmpty }

        mutating func push(_ item: Item, cost: Int, connection: ObjectIdentifier) {
            if lanes[connection] == nil {
                lanes[connection] = Line()
                turn.append(connection)
            }
            lanes[connection]!.append((item, cost))
        }

        func peekCost() -> Int? { turn.first.flatMap { lanes[$0]?.first?.cost } }

        /// The first request of the connection whose turn it is; the connection goes to the back
        /// of the turn, or away when it has no more.
        mutating func pop() -> (item: Item, cost: Int) {
            let connection = turn.removeFirst()
            let taken = lanes[connection]!.removeFirst()
            if lanes[connection]!.isEmpty {
                lanes[connection] = nil
            } else {
                turn.append(connection)
            }
            return taken
        }
    }

    /// One app's waiting requests, by priority (a class: changed in place, never copied).
    private final class App {
        var deficit = 0
        /// It is at the front of the round and has had this round's quantum.
        var inTurn = false
        var waiting = 0
        var priorities = Array(repeating: Lanes(), count: FairQueue.priorities)

        func push(_ item: Item, cost: Int, connection: ObjectIdentifier, priority: Int) {
            priorities[priority].push(item, cost: cost, connection: connection)
            waiting += 1
        }

        /// The cost of the request that goes next.
        func peekCost() -> Int? { priorities.first { !$0.isEmpty }?.peekCost() }

        /// The next request: of the highest priority with any.
        func pop() -> (item: Item, cost: Int)? {
            guard let priority = priorities.firstIndex(where: { !$0.isEmpty }) else { return nil }
            waiting -= 1
            return priorities[priority].pop()
        }
    }

    /// What a round gives each app to spend.
    let quantum: Int
    private var apps: [String: App] = [:]
    /// Apps with requests waiting, in the round's order (the one whose turn it is first).
    private var round = Line<String>()
    /// Requests waiting.
    private(set) var count = 0

    init(quantum: Int) { self.quantum = max(1, quantum) }

    var isEmpty: Bool { count == 0 }

    /// Queues `item` under `key`, costing `cost` (bytes).
    mutating func push(_ item: Item, key: QueueKey, cost: Int) {
        let app: App
        if let waiting = apps[key.app] {
            app = waiting
        } else {
            app = App()
            apps[key.app] = app
            round.append(key.app)
        }
        app.push(item, cost: max(1, cost), connection: key.connection, priority: key.priority)
        count += 1
    }

    /// The request that goes next, or nil when none waits.
    mutating func pop() -> Item? {
        while let name = round.first {
            let app = apps[name]!
            if !app.inTurn {
                app.deficit += quantum
                app.inTurn = true
            }
            if let cost = app.peekCost(), cost <= app.deficit, let taken = app.pop() {
                app.deficit -= cost
                count -= 1
                if app.waiting == 0 {
                    // Nothing left: it leaves the round, and starts afresh when it has more.
                    apps[name] = nil
                    _ = round.removeFirst()
                }
                return taken.item
            }
            // Its quantum is spent: to the back of the round, its deficit kept.
            app.inTurn = false
            round.append(round.removeFirst())
        }
        return nil
    }
}
