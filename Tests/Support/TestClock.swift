import Foundation
import PushMedia

/// A clock the test moves: its wall-clock time (`wall`, from the whole second it was made in)
/// stands still until `advance`.
public final class TestClock: Sendable {
    private let startDate = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
    private let elapsed = Locked(Duration.zero)

    public init() {}

    /// The wall-clock time now.
    public var date: Date { startDate.addingTimeInterval(Self.seconds(elapsed.withLock { $0 })) }

    /// This clock as the wall clock of a pipeline or a store.
    public var wall: WallClock { WallClock { [self] in date } }

    /// Moves the time on by `duration`.
    public func advance(by duration: Duration) {
        elapsed.withLock { $0 += duration }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
