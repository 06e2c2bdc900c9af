import PushMedia
import Testing
import Tracing

/// A span's attributes as PushMedia's own spans keep them: a list in the order set, a key set
/// again keeping its place with its new value, the same set as swift-distributed-tracing's.
@Suite("Span fields")
struct SpanFieldsTests {
    /// Bytes, not canonical equivalence; the same whether the strings share a representation
    /// (one literal, a small string) or were made apart.
    @Test func stringsAreComparedByTheirBytes() {
        let long = "http.response.status_code"
        let madeApart = String(decoding: Array(long.utf8), as: UTF8.self)
        #expect(long.hasSameBytes(as: long) && long.hasSameBytes(as: madeApart) && madeApart.hasSameBytes(as: long))
        #expect("caf\u{E9}".hasSameBytes(as: "caf\u{E9}") && "caf\u{E9}" == "cafe\u{301}")
        #expect(!"caf\u{E9}".hasSameBytes(as: "cafe\u{301}"))
        #expect(!long.hasSameBytes(as: "http.response.status_codE") && !"ab".hasSameBytes(as: "ba"))
        #expect("".hasSameBytes(as: String(decoding: [UInt8](), as: UTF8.self)) && !"".hasSameBytes(as: "a"))
    }

    @Test func aKeySetAgainKeepsItsPlaceWithItsNewValue() {
        var fields = SpanFields(minimumCapacity: 2)
        fields["http.route"] = "/v1/process"
        fields["http.response.status_code"] = 200
        fields["pushmedia.cache_hit"] = true
        fields["http.response.status_code"] = 503
        #expect(fields.fields.map(\.key) == ["http.route", "http.response.status_code", "pushmedia.cache_hit"])
        #expect(fields.get("http.response.status_code") == .int64(503))
        let status: Int? = fields["http.response.status_code"]
        #expect(status == 503)
        fields["pushmedia.ratio"] = 0.5  // a type without its own subscript: through the protocol
        #expect(fields.get("pushmedia.ratio") == .double(0.5))
        fields["http.route"] = nil as String?
        #expect(fields.fields.map(\.key) == ["http.response.status_code", "pushmedia.cache_hit", "pushmedia.ratio"])
        // Keys are their bytes, as OTLP sends them: Swift's equal strings "é" and "e\u{301}" are two.
        fields["caf\u{E9}"] = 1
        fields["cafe\u{301}"] = 2
        fields["caf\u{E9}"] = 3
        #expect(fields.count == 5 && fields.get("caf\u{E9}") == .int64(3) && fields.get("cafe\u{301}") == .int64(2))
    }

    @Test func theSameSetAsTheTracingLibrarys() {
        var attributes = SpanAttributes()
        attributes["a"] = "x"
        attributes["b"] = 2
        let fields = SpanFields(attributes)
        #expect(fields.count == 2 && fields.get("a") == .string("x") && fields.get("b") == .int64(2))
        #expect(fields.attributes == attributes)
        let literal: SpanFields = ["a": "x", "b": 2]
        #expect(literal.attributes == attributes)
    }

    /// Any other span (not the tracer's own) takes the change through its `attributes`.
    @Test func editAttributesChangesAnySpan() {
        let span = TestSpan()
        span.editAttributes { $0["k"] = "v" }
        span.setAttribute("n", 3)
        span.editAttributes { $0["k"] = "w" }
        #expect(span.attributes.get("k") == .string("w") && span.attributes.get("n") == .int64(3))
    }
}

private final class TestSpan: Span, @unchecked Sendable {
    let context = ServiceContext.topLevel
    var operationName = "test"
    var attributes = SpanAttributes()
    var isRecording: Bool { true }
    func setStatus(_ status: SpanStatus) {}
    func addEvent(_ event: SpanEvent) {}
    func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {}
    func addLink(_ link: SpanLink) {}
    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {}
}
