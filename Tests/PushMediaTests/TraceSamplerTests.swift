import PushMedia
import Testing

/// Which work begins a recorded trace: OpenTelemetry's samplers, decided before any span exists.
@Suite("Trace sampler")
struct TraceSamplerTests {
    /// W3C's example: its trace id's last 8 bytes, read little-endian as every OpenTelemetry SDK
    /// reads them, are 0x36470e0e9d92cea3, about 0.212 of 2^64.
    static let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    static let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"

    @Test func parentBasedRulesFollowTheCaller() {
        for rule in [TraceSampler.Rule.parentBasedAlwaysOn, .parentBasedAlwaysOff, .parentBasedTraceIDRatio] {
            let sampler = TraceSampler(rule: rule, ratio: 0)
            #expect(sampler.samples(traceparent: Self.sampled), "\(rule)")
            #expect(!sampler.samples(traceparent: Self.unsampled), "\(rule)")
        }
        #expect(TraceSampler(rule: .parentBasedAlwaysOn).samples(traceparent: nil))
        #expect(!TraceSampler(rule: .parentBasedAlwaysOff).samples(traceparent: nil))
        #expect(!TraceSampler(rule: .parentBasedTraceIDRatio, ratio: 0).samples(traceparent: nil))
        #expect(TraceSampler(rule: .parentBasedTraceIDRatio, ratio: 1).samples(traceparent: nil))
    }

    @Test func constantRulesIgnoreTheCaller() {
        #expect(TraceSampler(rule: .alwaysOn).samples(traceparent: Self.unsampled))
        #expect(!TraceSampler(rule: .alwaysOff).samples(traceparent: Self.sampled))
    }

    @Test func ratioRuleReadsTheCallersTraceIDAsOpenTelemetryDoes() {
        #expect(TraceSampler(rule: .traceIDRatio, ratio: 0.25).samples(traceparent: Self.unsampled))
        #expect(!TraceSampler(rule: .traceIDRatio, ratio: 0.2).samples(traceparent: Self.sampled))
        // The first 8 bytes do not count; the last byte is the most significant.
        let low = "00-ffffffffffffffffff00000000000000-00f067aa0ba902b7-00"
        let high = "00-000000000000000100000000000000ff-00f067aa0ba902b7-01"
        #expect(TraceSampler(rule: .traceIDRatio, ratio: 0.01).samples(traceparent: low))
        #expect(!TraceSampler(rule: .traceIDRatio, ratio: 0.99).samples(traceparent: high))
    }

    @Test func invalidTraceparentIsNoParent() {
        let sampler = TraceSampler(rule: .parentBasedAlwaysOn)
        let invalid = [
            "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-00",  // upper case
            "00-00000000000000000000000000000000-00f067aa0ba902b7-00",  // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-00",  // zero parent id
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",  // version ff
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra",  // version 00 has no more
        ]
        // A parent-based rule treats each as no caller: a trace begins here (always_on).
        for field in invalid { #expect(sampler.samples(traceparent: field), "\(field)") }
        // A later version may carry more fields.
        #expect(!sampler.samples(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more"))
    }

    @Test func traceparentIsReadAndWrittenAsW3CSpellsIt() throws {
        let parent = try #require(TraceParent(Self.sampled))
        #expect(parent.traceHigh == 0x4bf9_2f35_77b3_4da6 && parent.traceLow == 0xa3ce_929d_0e0e_4736)
        #expect(parent.parentID == 0x00f0_67aa_0ba9_02b7 && parent.sampled)
        #expect(parent.header == Self.sampled)
        #expect(parent.traceIDText == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(TraceParent.text(ofSpanID: 1) == "0000000000000001")
        #expect(TraceParent(Self.unsampled)?.header == Self.unsampled)
        // A later version's is read as version 00, and written so.
        let later = try #require(TraceParent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-more"))
        #expect(later.header == Self.sampled)
    }

    @Test func ratioOfTracesBegunHere() {
        let sampler = TraceSampler(rule: .parentBasedTraceIDRatio, ratio: 0.01)
        let recorded = (0..<100_000).filter { _ in sampler.samples(traceparent: nil) }.count
        // 1,000 expected; the binomial's standard deviation is about 31.
        #expect((800...1200).contains(recorded), "\(recorded) of 100000")
    }
}
