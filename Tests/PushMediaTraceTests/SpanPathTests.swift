import CoreMetrics
import Foundation
import Logging
import PushMedia
import SwiftProtobuf
import Synchronization
import Testing
import Tracing

@testable import PushMediaTrace

/// PushMedia's span path: the ring ended spans go into, their OTLP encoding, and the tracer's
/// W3C Trace Context in and out. (scripts/tracing.sh checks the exports at a real receiver.)
@Suite("Span path")
struct SpanPathTests {
    static let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    static func finished(spanID: UInt64) -> FinishedSpan {
        FinishedSpan(
            name: "span", kind: .internal,
            identity: SpanIdentity(
                traceHigh: 1, traceLow: 2, spanID: spanID, sampled: true, traceState: nil, recorded: true),
            parentID: 0, start: 1, end: 2, attributes: [:], events: [], links: [], status: nil)
    }

    /// Four producers put 40,000 spans into a ring of 1,024 while one thread takes them: every
    /// span is taken once or counted as dropped, none twice.
    @Test func theRingHandsEverySpanOverOnceOrCountsItDropped() async throws {
        let ring = SpanRing(minimum: 1024)
        let producers = 4
        let each = 10_000
        let shared = Consumer()
        let consumer = Thread {
            var ids: [UInt64] = []
            while shared.producing.load(ordering: .acquiring) {
                if let span = ring.take() { ids.append(span.identity.spanID) }
            }
            while let span = ring.take() { ids.append(span.identity.spanID) }
            shared.taken.withLock { $0 = ids }
        }
        consumer.start()
        await withTaskGroup(of: Void.self) { group in
            for producer in 0..<producers {
                group.addTask {
                    for index in 0..<each { _ = ring.put(Self.finished(spanID: UInt64(producer * each + index + 1))) }
                }
            }
        }
        shared.producing.store(false, ordering: .releasing)
        let deadline = ContinuousClock.now + .seconds(60)
        while shared.taken.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let ids = try #require(shared.taken.withLock { $0 })
        let dropped = ring.takeDropped()
        #expect(Set(ids).count == ids.count, "a span was taken twice")
        #expect(ids.count + dropped == producers * each, "\(ids.count) taken, \(dropped) dropped")
        #expect(ids.allSatisfy { (1...UInt64(producers * each)).contains($0) })
    }

    @Test func aFullRingKeepsWhatItHoldsAndCountsTheRest() {
        let ring = SpanRing(minimum: 3)
        #expect(ring.capacity == 4)
        let stored = (1...6).map { ring.put(Self.finished(spanID: UInt64($0))).stored }
        #expect(stored == [true, true, true, true, false, false])
        #expect(ring.takeDropped() == 2 && ring.takeDropped() == 0)
        #expect((1...4).map { _ in ring.take()?.identity.spanID } == [1, 2, 3, 4])
        #expect(ring.take() == nil)
        // The slots are used again once taken.
        #expect(ring.put(Self.finished(spanID: 7)).stored && ring.take()?.identity.spanID == 7)
    }

    @Test func aSpanIsEncodedAsOpenTelemetryDefinesIt() throws {
        var attributes = SpanAttributes()
        attributes["http.response.status_code"] = 200
        attributes["pushmedia.status"] = "processed"
        attributes["pushmedia.best_attempt"] = false
        attributes["pushmedia.ratio"] = 0.5
        let parent = try #require(TraceParent(Self.caller))
        var linked = ServiceContext.topLevel
        linked.spanIdentity = SpanIdentity(
            traceHigh: 7, traceLow: 8, spanID: 9, sampled: true, traceState: nil, recorded: true)
        let span = FinishedSpan(
            name: "POST /v1/process", kind: .server,
            identity: SpanIdentity(
                traceHigh: parent.traceHigh, traceLow: parent.traceLow, spanID: 0x1234, sampled: true,
                traceState: "vendor=1", recorded: true),
            parentID: parent.parentID, start: 1_000, end: 2_500, attributes: SpanFields(attributes),
            events: [SpanEvent(name: "retry", at: DefaultTracerClock.now, attributes: ["attempt": 2])],
            links: [SpanLink(context: linked, attributes: [:])], status: SpanStatus(code: .error, message: "rejected"))
        var encoding = OTLPEncoding(serviceName: "push", resourceAttributes: ["deployment.environment": "test"])
        let bytes = try encoding.encode([span])
        let request = try Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceRequest(serializedBytes: bytes)
        let resource = try #require(request.resourceSpans.first)
        let resourceAttributes = Dictionary(
            uniqueKeysWithValues: resource.resource.attributes.map { ($0.key, $0.value.stringValue) })
        #expect(resourceAttributes["service.name"] == "push")
        #expect(resourceAttributes["deployment.environment"] == "test")
        #expect(resource.scopeSpans.first?.scope.name == "pushmedia")
        let encoded = try #require(resource.scopeSpans.first?.spans.first)
        #expect(encoded.traceID.map { String(format: "%02x", $0) }.joined() == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(encoded.parentSpanID.map { String(format: "%02x", $0) }.joined() == "00f067aa0ba902b7")
        #expect(encoded.spanID == Data([0, 0, 0, 0, 0, 0, 0x12, 0x34]))
        #expect(encoded.traceState == "vendor=1")
        #expect(encoded.name == "POST /v1/process" && encoded.kind == .server)
        #expect(encoded.startTimeUnixNano == 1_000 && encoded.endTimeUnixNano == 2_500)
        let values = Dictionary(uniqueKeysWithValues: encoded.attributes.map { ($0.key, $0.value) })
        #expect(values["http.response.status_code"]?.intValue == 200)
        #expect(values["pushmedia.status"]?.stringValue == "processed")
        #expect(values["pushmedia.best_attempt"]?.boolValue == false)
        #expect(values["pushmedia.ratio"]?.doubleValue == 0.5)
        #expect(encoded.events.first?.name == "retry" && encoded.events.first?.attributes.first?.value.intValue == 2)
        #expect(encoded.links.first?.spanID == Data([0, 0, 0, 0, 0, 0, 0, 9]))
        #expect(encoded.status.code == .error && encoded.status.message == "rejected")
    }

    /// The request's enclosing messages and each span's attributes are framed around what
    /// swift-protobuf encodes: the bytes are the ones it makes of the whole request, lengths of
    /// one to three bytes included, whether an attribute's bytes were kept from an earlier span
    /// or not (too long, or its key has had too many values).
    @Test func aBatchIsTheRequestSwiftProtobufWouldEncode() throws {
        var encoding = OTLPEncoding(serviceName: "push", resourceAttributes: [:])
        for count in [1, 3, 300, 300] {
            let spans = (0..<count).map { index in
                var attributes = SpanFields()
                for key in 0..<(index % 7) { attributes["key.\(key)"] = String(repeating: "v", count: index) }
                attributes["status"] = index % 3 == 0 ? "processed" : "rejected"
                attributes["cache_hit"] = index % 2 == 0
                attributes["count"] = index % 5
                attributes["ratio"] = SpanAttribute.double(Double(index) / 4)
                attributes["sizes"] = SpanAttribute.int64Array([Int64(index), 1])
                // More than the positions kept, on some spans of the name.
                if index % 13 == 0 { for key in 0..<40 { attributes["many.\(key)"] = key % 3 } }
                var span = Self.finished(spanID: UInt64(index + 1))
                span.attributes = attributes
                if index % 11 == 0 { span.status = SpanStatus(code: .error, message: "HTTP 500") }
                return span
            }
            let bytes = try encoding.encode(spans)
            let request = try Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceRequest(serializedBytes: bytes)
            #expect(request.resourceSpans.count == 1 && request.resourceSpans[0].scopeSpans.count == 1)
            let decoded = request.resourceSpans[0].scopeSpans[0].spans
            #expect(decoded.count == count)
            #expect(decoded.last?.attributes.count == (count - 1) % 7 + 5 + ((count - 1) % 13 == 0 ? 40 : 0))
            #expect(decoded.last?.attributes.first { $0.key == "ratio" }?.value.doubleValue == Double(count - 1) / 4)
            let whole: [UInt8] = try request.serializedBytes()
            #expect(whole == bytes)
        }
    }

    /// A position whose value is new on each span (an `apns-id`) is no longer compared for a
    /// while; before, during and after that, a batch is still what swift-protobuf makes of it.
    @Test func aPositionOfNewValuesRestsAndItsBytesStayExact() throws {
        var encoding = OTLPEncoding(serviceName: "push", resourceAttributes: [:])
        let fresh = EncodedAttributes.missesBeforeRest + EncodedAttributes.restSpans + 10
        let ids = (0..<fresh).map { "id-\($0)" } + (0..<40).map { $0 % 2 == 0 ? "id-1" : "caf\u{E9}" }
        let spans = ids.indices.map { index in
            var span = Self.finished(spanID: UInt64(index + 1))
            span.attributes = ["apns-id": .string(ids[index]), "status": .string(index % 3 == 0 ? "sent" : "failed")]
            return span
        }
        var decoded: [ProtoSpan] = []
        for batch in [spans[..<700], spans[700...]] {
            let bytes = try encoding.encode(Array(batch))
            let request = try Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceRequest(serializedBytes: bytes)
            let whole: [UInt8] = try request.serializedBytes()
            #expect(whole == bytes)
            decoded += request.resourceSpans[0].scopeSpans[0].spans
        }
        #expect(decoded.map { $0.attributes[0].value.stringValue } == ids)
        let statuses = spans.indices.map { $0 % 3 == 0 ? "sent" : "failed" }
        #expect(decoded.map { $0.attributes[1].value.stringValue } == statuses)
    }

    /// An attribute's bytes are its own, whether kept from an earlier span or not: two strings
    /// Swift calls equal ("é" composed and not) are sent as each was set.
    @Test func anAttributeIsSentAsItWasSet() throws {
        var encoding = OTLPEncoding(serviceName: "push", resourceAttributes: [:])
        let texts = ["caf\u{E9}", "cafe\u{301}", "cafe", "caf\u{E9}", "cafe\u{301}", "cafe"]
        #expect(texts[0] == texts[1])
        let spans = texts.indices.map { index in
            var span = Self.finished(spanID: UInt64(index + 1))
            span.attributes = ["place": .string(texts[index]), texts[index]: .int64(1)]
            return span
        }
        let bytes = try encoding.encode(spans)
        let request = try Opentelemetry_Proto_Collector_Trace_V1_ExportTraceServiceRequest(serializedBytes: bytes)
        let decoded = request.resourceSpans[0].scopeSpans[0].spans
        #expect(decoded.map { Array($0.attributes[0].value.stringValue.utf8) } == texts.map { Array($0.utf8) })
        #expect(decoded.map { Array($0.attributes[1].key.utf8) } == texts.map { Array($0.utf8) })
    }

    /// A caller's trace is joined, its `tracestate` passed on; each span is the parent of the
    /// next; spans that cannot reach a collector are counted lost.
    @Test func theTracerJoinsTheCallersTraceAndCountsWhatTheCollectorDidNotTake() async throws {
        let lost = LostSpans()
        // Port 9 (discard) on loopback: nothing listens, the connection is refused.
        let exporter = SpanExporter(
            settings: .init(
                url: "http://127.0.0.1:9/v1/traces", headers: [("api-key", "secret")], serviceName: "test",
                resourceAttributes: [:], maxQueue: 64),
            lost: Counter(label: "lost", dimensions: [], handler: lost), logger: Logger(label: "test"))
        let tracer = PushMediaTracer(exporter: exporter)
        var context = ServiceContext.topLevel
        tracer.extract(["traceparent": Self.caller, "tracestate": "a=1"], into: &context, using: Fields())
        // A caller's ids alone are no span of this process: a log line carries no trace fields.
        #expect(context.spanIdentity?.recorded == false)
        #expect(ServiceContext.$current.withValue(context) { PushMediaTracer.logIDs() } == nil)
        let server = tracer.startSpan(
            "server", context: context, ofKind: .server, at: DefaultTracerClock.now, function: #function,
            file: #fileID, line: #line)
        let child = tracer.startSpan(
            "child", context: server.context, ofKind: .client, at: DefaultTracerClock.now, function: #function,
            file: #fileID, line: #line)
        let serverID = try #require(server.context.spanIdentity)
        let childID = try #require(child.context.spanIdentity)
        #expect(serverID.traceParent.traceIDText == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(childID.traceLow == serverID.traceLow && childID.spanID != serverID.spanID && childID.spanID != 0)
        var sent: [String: String] = [:]
        tracer.inject(child.context, into: &sent, using: Fields())
        #expect(
            sent["traceparent"]
                == "00-4bf92f3577b34da6a3ce929d0e0e4736-\(TraceParent.text(ofSpanID: childID.spanID))-01")
        #expect(sent["tracestate"] == "a=1")
        // A trace begun here has ids of its own.
        let root = tracer.startSpan(
            "root", context: .topLevel, ofKind: .internal, at: DefaultTracerClock.now, function: #function,
            file: #fileID, line: #line)
        #expect(root.context.spanIdentity?.traceLow != serverID.traceLow)
        // Set in place, through the span and through `editAttributes` on any span.
        child.attributes["k"] = "v"
        let span: any Span = server
        span.editAttributes { attributes in
            attributes["a"] = 1
            attributes["b"] = "x"
        }
        span.attributes["c"] = true
        #expect(child.attributes.get("k") == .string("v"))
        #expect(server.attributes.get("a") == .int64(1) && server.attributes.get("b") == .string("x"))
        #expect(server.attributes.get("c") == .bool(true))
        child.end()
        child.attributes["after"] = "end"
        #expect(!child.isRecording && child.attributes.get("after") == nil)
        // A span's context is made the first time it is asked for, even once the span has ended,
        // and is the same each time.
        let leaf = tracer.startSpan(
            "leaf", context: server.context, ofKind: .internal, at: DefaultTracerClock.now, function: #function,
            file: #fileID, line: #line)
        leaf.end()
        let leafID = try #require(leaf.context.spanIdentity)
        #expect(leafID.recorded && leafID.traceLow == serverID.traceLow && leafID.spanID != childID.spanID)
        #expect(leaf.context.spanIdentity == leafID && server.context.spanIdentity == serverID)
        server.end()
        root.end()
        await exporter.shutdown()
        #expect(lost.total == 4)
    }

    /// Spans that fill less than a batch wait for the schedule's delay (or a flush) before they are
    /// sent: here to a port where nothing listens, so that each try shows as spans lost.
    @Test func fewSpansWaitForTheScheduleDelay() async throws {
        func exporter(delay: Duration, lost: LostSpans) -> SpanExporter {
            SpanExporter(
                settings: .init(
                    url: "http://127.0.0.1:9/v1/traces", headers: [], serviceName: "test", resourceAttributes: [:],
                    maxQueue: 64, scheduleDelay: delay),
                lost: Counter(label: "lost", dimensions: [], handler: lost), logger: Logger(label: "test"))
        }
        func sent(_ lost: LostSpans, within: Duration) async throws -> Bool {
            let deadline = ContinuousClock.now + within
            while lost.total == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            return lost.total > 0
        }
        let (slowLost, quickLost) = (LostSpans(), LostSpans())
        let slow = exporter(delay: .seconds(600), lost: slowLost)
        let quick = exporter(delay: .milliseconds(50), lost: quickLost)
        slow.add(Self.finished(spanID: 1))
        quick.add(Self.finished(spanID: 2))
        #expect(try await sent(quickLost, within: .seconds(5)))
        // Longer than the default half second: the slow one has not tried yet.
        try await Task.sleep(for: .seconds(1))
        #expect(slowLost.total == 0)
        slow.flush()
        #expect(try await sent(slowLost, within: .seconds(5)))
        await slow.shutdown()
        await quick.shutdown()
        #expect(slowLost.total == 1 && quickLost.total == 1)
    }

    /// The sampler's first span marks its trace recorded, with the tracer: its work's child spans
    /// and log lines (their trace ids) follow from the context alone; outside it there are none.
    @Test func aTraceTheSamplerBeginsCarriesItsTracerToEveryChild() async throws {
        let lost = LostSpans()
        let exporter = SpanExporter(
            settings: .init(
                url: "http://127.0.0.1:9/v1/traces", headers: [], serviceName: "test", resourceAttributes: [:],
                maxQueue: 64),
            lost: Counter(label: "lost", dimensions: [], handler: lost), logger: Logger(label: "test"))
        let sampler = TraceSampler(rule: .alwaysOn, tracer: PushMediaTracer(exporter: exporter))
        let root = try #require(sampler.start("root", ofKind: .server))
        #expect(PipelineTrace.isRecorded(root.context) && !PipelineTrace.isRecorded(.topLevel))
        let upstream = try #require(PipelineTrace.child("upstream", of: root, ofKind: .client))
        let rootID = try #require(root.context.spanIdentity)
        let upstreamID = try #require(upstream.context.spanIdentity)
        #expect(upstreamID.traceLow == rootID.traceLow && upstreamID.spanID != rootID.spanID)
        let (inner, ids) = ServiceContext.$current.withValue(PipelineTrace.context(of: root)) {
            (PipelineTrace.child("inner"), PushMediaTracer.logIDs())
        }
        #expect(inner?.context.spanIdentity?.traceHigh == rootID.traceHigh)
        #expect(ids == rootID.traceParent && ids?.parentID == rootID.spanID)
        // The span's own ids, read without its context, are the same.
        #expect(PipelineTrace.logIDs(of: upstream) == upstreamID.traceParent)
        #expect(PipelineTrace.logIDs(of: nil) == nil)
        // Outside a recorded trace: no child span, no trace fields.
        #expect(PipelineTrace.child("none") == nil && PushMediaTracer.logIDs() == nil)
        for span in [inner, upstream, root] { span?.end() }
        await exporter.shutdown()
        #expect(lost.total == 3)
    }

    /// A child of the tracer's own span is started by the span, without making its context: the
    /// same trace, `tracestate` and parent, and a context of its own made as the parent's would
    /// make it (recorded, so its own children follow); none once the parent has ended.
    @Test func aSpanStartsItsChildWithoutMakingItsContext() async throws {
        let exporter = SpanExporter(
            settings: .init(
                url: "http://127.0.0.1:9/v1/traces", headers: [], serviceName: "test", resourceAttributes: [:],
                maxQueue: 64),
            lost: Counter(label: "lost", dimensions: [], handler: LostSpans()), logger: Logger(label: "test"))
        let sampler = TraceSampler(rule: .alwaysOn, tracer: PushMediaTracer(exporter: exporter))
        let push = try #require(
            sampler.start(
                "push", ofKind: .server, from: ["traceparent": Self.caller, "tracestate": "a=1"], using: Fields())
                as? RecordedSpan)
        let upstream = try #require(PipelineTrace.child("upstream", of: push, ofKind: .client) as? RecordedSpan)
        let grandchild = try #require(PipelineTrace.child("inner", of: upstream) as? RecordedSpan)
        #expect(PipelineTrace.isRecorded(upstream.context))
        let pushID = try #require(push.context.spanIdentity)
        let upstreamID = try #require(upstream.context.spanIdentity)
        let grandchildID = try #require(grandchild.context.spanIdentity)
        #expect(pushID.traceParent.traceIDText == "4bf92f3577b34da6a3ce929d0e0e4736")
        for id in [upstreamID, grandchildID] {
            #expect(id.traceHigh == pushID.traceHigh && id.traceLow == pushID.traceLow)
            #expect(id.traceState == "a=1" && id.recorded && id.sampled)
        }
        #expect(Set([pushID.spanID, upstreamID.spanID, grandchildID.spanID]).count == 3)
        #expect(upstream.parentID == pushID.spanID && grandchild.parentID == upstreamID.spanID)
        #expect(PipelineTrace.logIDs(of: upstream)?.parentID == upstreamID.spanID)
        upstream.end()
        #expect(PipelineTrace.child("late", of: upstream) == nil)
        for span in [grandchild, push] { span.end() }
        await exporter.shutdown()
    }
}

/// What the ring's consumer thread shares with the test.
private final class Consumer: Sendable {
    let producing = Atomic<Bool>(true)
    let taken = Mutex<[UInt64]?>(nil)
}

/// Header fields as a dictionary, both ways.
private struct Fields: Extractor, Injector {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}

private final class LostSpans: CounterHandler, Sendable {
    private let count = Mutex(0)
    var total: Int { count.withLock { $0 } }
    func increment(by amount: Int64) { count.withLock { $0 += Int(amount) } }
    func reset() { count.withLock { $0 = 0 } }
}
