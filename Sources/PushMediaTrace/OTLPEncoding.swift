import Foundation
import PushMedia
package import SwiftProtobuf
import Tracing

typealias ProtoSpan = Opentelemetry_Proto_Trace_V1_Span
typealias ProtoKeyValue = Opentelemetry_Proto_Common_V1_KeyValue
typealias ProtoValue = Opentelemetry_Proto_Common_V1_AnyValue

/// Finished spans as OTLP's `ExportTraceServiceRequest` (protobuf, opentelemetry-proto's types
/// as protoc-gen-swift generates them): one resource (`service.name` and the operator's
/// attributes), one instrumentation scope (`pushmedia`), the spans with their attributes,
/// events, links and status.
///
/// swift-protobuf encodes each span, and the resource and the scope once. The three messages
/// around them (the request, its resource spans, their scope spans) are only the spans' bytes
/// with a field's key and length before each: they are framed here, because swift-protobuf
/// sizes a nested message again at every level that encloses it, and a whole request encoded
/// at once spent most of its time sizing each attribute six times.
struct OTLPEncoding: Sendable {
    private let resource: Opentelemetry_Proto_Resource_V1_Resource
    private let scope: Opentelemetry_Proto_Common_V1_InstrumentationScope
    /// `ResourceSpans` with the resource only, and `ScopeSpans` with the scope only, encoded.
    private let resourceField: [UInt8]
    private let scopeField: [UInt8]

    init(serviceName: String, resourceAttributes: [String: String]) {
        var attributes = resourceAttributes
        attributes["service.name"] = serviceName
        attributes["telemetry.sdk.name"] = "pushmedia"
        attributes["telemetry.sdk.language"] = "swift"
        attributes["telemetry.sdk.version"] = PushMediaVersion.string
        var resource = Opentelemetry_Proto_Resource_V1_Resource()
        resource.attributes = attributes.sorted { $0.key < $1.key }.map { Self.keyValue($0.key, string: $0.value) }
        self.resource = resource
        var scope = Opentelemetry_Proto_Common_V1_InstrumentationScope()
        scope.name = "pushmedia"
        scope.version = PushMediaVersion.string
        self.scope = scope
        var resourceSpans = Opentelemetry_Proto_Trace_V1_ResourceSpans()
        resourceSpans.resource = resource
        resourceField = (try? resourceSpans.serializedBytes()) ?? []
        var scopeSpans = Opentelemetry_Proto_Trace_V1_ScopeSpans()
        scopeSpans.scope = scope
        scopeField = (try? scopeSpans.serializedBytes()) ?? []
    }

    /// The request's bytes for `spans`: what swift-protobuf makes of
    /// `ExportTraceServiceRequest { resource_spans: [{ resource, scope_spans: [{ scope, spans }] }] }`.
    func encode(_ spans: [FinishedSpan]) throws -> [UInt8] {
        // The spans of one trace end together (a push's two, a request's four): their trace id
        // is made once.
        var trace: (high: UInt64, low: UInt64, id: Data) = (0, 0, Data())
        let encoded = try spans.map { finished -> [UInt8] in
            let identity = finished.identity
            if trace.id.isEmpty || identity.traceHigh != trace.high || identity.traceLow != trace.low {
                trace = (identity.traceHigh, identity.traceLow, Self.traceID(identity))
            }
            return try Self.span(finished, traceID: trace.id).serializedBytes()
        }
        // ScopeSpans: the scope (field 1), then each span (field 2, `spans`).
        let scopeSpansLength = encoded.reduce(scopeField.count) { $0 + Self.fieldLength($1.count) }
        // ResourceSpans: the resource (field 1), then the scope spans (field 2, `scope_spans`).
        let resourceSpansLength = resourceField.count + Self.fieldLength(scopeSpansLength)
        var request: [UInt8] = []
        request.reserveCapacity(Self.fieldLength(resourceSpansLength))
        // ExportTraceServiceRequest: the resource spans (field 1, `resource_spans`).
        Self.appendKey(field: 1, length: resourceSpansLength, to: &request)
        request += resourceField
        Self.appendKey(field: 2, length: scopeSpansLength, to: &request)
        request += scopeField
        for span in encoded {
            Self.appendKey(field: 2, length: span.count, to: &request)
            request += span
        }
        return request
    }

    /// A length-delimited field's key (field number, wire type 2) and length, as protobuf's
    /// encoding defines them.
    private static func appendKey(field: UInt8, length: Int, to bytes: inout [UInt8]) {
        bytes.append(field << 3 | 2)
        var rest = UInt64(length)
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// The bytes a length-delimited field of `length` bytes takes: its key, length and bytes.
    private static func fieldLength(_ length: Int) -> Int {
        var varint = 1
        var rest = UInt64(length) >> 7
        while rest > 0 {
            varint += 1
            rest >>= 7
        }
        return 1 + varint + length
    }

    /// `finished` as OTLP's span; `traceID` is its trace id's bytes.
    static func span(_ finished: FinishedSpan, traceID: Data) -> ProtoSpan {
        var span = ProtoSpan()
        span.traceID = traceID
        span.spanID = id(finished.identity.spanID)
        if finished.parentID != 0 { span.parentSpanID = id(finished.parentID) }
        if let state = finished.identity.traceState { span.traceState = state }
        span.name = finished.name
        span.kind = kind(finished.kind)
        span.startTimeUnixNano = finished.start
        span.endTimeUnixNano = finished.end
        span.attributes = keyValues(finished.attributes)
        span.events = finished.events.map { event in
            var encoded = ProtoSpan.Event()
            encoded.name = event.name
            encoded.timeUnixNano = event.nanosecondsSinceEpoch
            encoded.attributes = keyValues(SpanFields(event.attributes))
            return encoded
        }
        span.links = finished.links.compactMap { link in
            guard let identity = link.context.spanIdentity else { return nil }
            var encoded = ProtoSpan.Link()
            encoded.traceID = Self.traceID(identity)
            encoded.spanID = id(identity.spanID)
            if let state = identity.traceState { encoded.traceState = state }
            encoded.attributes = keyValues(SpanFields(link.attributes))
            return encoded
        }
        if let status = finished.status {
            var encoded = Opentelemetry_Proto_Trace_V1_Status()
            switch status.code {
            case .ok: encoded.code = .ok
            case .error: encoded.code = .error
            }
            if let message = status.message { encoded.message = message }
            span.status = encoded
        }
        return span
    }

    private static func kind(_ kind: SpanKind) -> ProtoSpan.SpanKind {
        switch kind {
        case .server: .server
        case .client: .client
        case .producer: .producer
        case .consumer: .consumer
        case .internal: .internal
        }
    }

    private static func traceID(_ identity: SpanIdentity) -> Data {
        var bytes = Data(count: 16)
        bytes.withUnsafeMutableBytes { buffer in
            buffer.storeBytes(of: identity.traceHigh.bigEndian, toByteOffset: 0, as: UInt64.self)
            buffer.storeBytes(of: identity.traceLow.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        return bytes
    }

    private static func id(_ value: UInt64) -> Data {
        withUnsafeBytes(of: value.bigEndian) { Data($0) }
    }

    static func keyValues(_ attributes: SpanFields) -> [ProtoKeyValue] {
        var encoded: [ProtoKeyValue] = []
        encoded.reserveCapacity(attributes.count)
        for index in attributes.fields.indices {
            guard let encodedValue = value(attributes.fields[index].value) else { continue }
            var pair = ProtoKeyValue()
            pair.key = attributes.fields[index].key
            pair.value = encodedValue
            encoded.append(pair)
        }
        return encoded
    }

    private static func keyValue(_ key: String, string: String) -> ProtoKeyValue {
        var pair = ProtoKeyValue()
        pair.key = key
        pair.value.stringValue = string
        return pair
    }

    private static func value(_ attribute: SpanAttribute) -> ProtoValue? {
        var value = ProtoValue()
        switch attribute {
        case .int32(let number): value.intValue = Int64(number)
        case .int64(let number): value.intValue = number
        case .double(let number): value.doubleValue = number
        case .bool(let flag): value.boolValue = flag
        case .string(let text): value.stringValue = text
        case .stringConvertible(let item): value.stringValue = item.description
        case .int32Array(let numbers): value.arrayValue = array(numbers.map { .int64(Int64($0)) })
        case .int64Array(let numbers): value.arrayValue = array(numbers.map { .int64($0) })
        case .doubleArray(let numbers): value.arrayValue = array(numbers.map { .double($0) })
        case .boolArray(let flags): value.arrayValue = array(flags.map { .bool($0) })
        case .stringArray(let texts): value.arrayValue = array(texts.map { .string($0) })
        case .stringConvertibleArray(let items): value.arrayValue = array(items.map { .string($0.description) })
        default: return nil
        }
        return value
    }

    private static func array(_ attributes: [SpanAttribute]) -> Opentelemetry_Proto_Common_V1_ArrayValue {
        var array = Opentelemetry_Proto_Common_V1_ArrayValue()
        array.values = attributes.compactMap(value)
        return array
    }
}
