import Testing

@testable import PushMedia

@Suite struct ClockTests {
    @Test func reportedMillisecondsCountEachSecondAsAThousand() {
        #expect(Duration.seconds(1.5).reportedMilliseconds == 1500)
        #expect(Duration.seconds(12).reportedMilliseconds == 12_000)
        #expect(Duration.milliseconds(2).reportedMilliseconds == 2)
        #expect(Duration.microseconds(1_234).reportedMilliseconds == 1.2)
        #expect(Duration.microseconds(2_001_250).reportedMilliseconds == 2001.3)
        #expect(Duration.zero.reportedMilliseconds == 0)
    }

    @Test func truncatedUnitsForTimeouts() {
        #expect(Duration.seconds(2.5).milliseconds == 2500)
        #expect(Duration.milliseconds(1_500).seconds == 1.5)
        #expect(Duration.microseconds(1_999).milliseconds == 1)
    }
}
