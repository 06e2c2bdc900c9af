import Foundation
import PushMedia
internal import SwiftProtobuf
import Tracing

typealias ProtoSpan = Opentelemetry_Proto_Trace_V1_Span
typealias ProtoKeyValue = Opentelemetry_Proto_Common_V1_KeyValue
typealias ProtoValue = Opentelemetry_Proto_Common_V1_AnyValue

/// Finished spans as OTLP's `ExportTraceServiceRequest` (protobuf, opentelemetry-proto's types
/// as protoc-gen-swift generates them): one resource (`service.name` and the operator's
/// attributes), one instrumentation scope (`pushmedia`), the spans with their attributes,
/// events, links and status.
///
/// swift-protobuf encodes every message; what is written here is only a length-delimited field's
/// key and length before bytes it made, in the order it would write them, so that a batch is
/// byte for byte the request swift-protobuf makes of the whole (a test checks it):
/// - the three messages around the spans (the request, its resource spans, their scope spans):
///   swift-protobuf sizes a nested message again at every level that encloses it, and a whole
///   request encoded at once spent most of its time sizing each attribute six times;
/// - a span's attributes (its field 9, between its end time and its events): each attribute is
///   a `KeyValue`, kept for the next span of the same name (`EncodedAttributes`), since most
///   take few values.
/// One thread encodes (the exporter's), and owns the encoding.
struct OTLPEncoding {
    /// `ResourceSpans` with the resource only, and `ScopeSpans` with the scope only, encoded.
    private let resourceField: [UInt8]
    private let scopeField: [UInt8]
    private var attributes = EncodedAttributes()

    init(serviceName: String, resourceAttributes: [String: String]) {
        var attributes = resourceAttributes
        attributes["service.name"] = serviceName
        attributes["telemetry.sdk.name"] = "pushmedia"
        attributes["telemetry.sdk.language"] = "swift"
        attributes["telemetry.sdk.version"] = PushMediaVersion.string
        var resource = Opentelemetry_Proto_Resource_V1_Resource()
        resource.attributes = attributes.sorted { $0.key < $1.key }.map { Self.keyValue($0.key, string: $0.value) }
        var scope = Opentelemetry_Proto_Common_V1_InstrumentationScope()
        scope.name = "pushmedia"
        scope.version = PushMediaVersion.string
        var resourceSpans = Opentelemetry_Proto_Trace_V1_ResourceSpans()
        resourceSpans.resource = resource
        resourceField = (try? resourceSpans.serializedBytes()) ?? []
        var scopeSpans = Opentelemetry_Proto_Trace_V1_ScopeSpans()
        scopeSpans.scope = scope
        scopeField = (try? scopeSpans.serializedBytes()) ?? []
    }

    /// The request's bytes for `spans`: what swift-protobuf makes of
    /// `ExportTraceServiceRequest { resource_spans: [{ resource, scope_spans: [{ scope, spans }] }] }`.
    mutating func encode(_ spans: [FinishedSpan]) throws -> [UInt8] {
        // The spans of one trace end together (a push's two, a request's four): their trace id
        // is made once.
        var trace: (high: UInt64, low: UInt64, id: Data) = (0, 0, Data())
        // Each span is made in one buffer, then appended to the batch's (`ScopeSpans`' field 2,
        // `spans`): two buffers a batch, where a buffer of its own for each span grew as its
        // attributes were appended.
        var spanBytes: [UInt8] = []
        spanBytes.reserveCapacity(4096)
        var spansBytes: [UInt8] = []
        spansBytes.reserveCapacity(spans.count * 512)
        // Each span read in place (a loop over the array's elements, or its subscript, copies each).
        try spans.withUnsafeBufferPointer { spans in
            for index in spans.indices {
                let (high, low) = (spans[index].identity.traceHigh, spans[index].identity.traceLow)
                if trace.id.isEmpty || high != trace.high || low != trace.low {
                    trace = (high, low, Self.traceID(spans[index].identity))
                }
                spanBytes.removeAll(keepingCapacity: true)
                try span(spans[index], traceID: trace.id, into: &spanBytes)
                Self.appendKey(field: 2, length: spanBytes.count, to: &spansBytes)
                spansBytes += spanBytes
            }
        }
        // ScopeSpans: the scope (field 1), then the spans.
        let scopeSpansLength = scopeField.count + spansBytes.count
        // ResourceSpans: the resource (field 1), then the scope spans (field 2, `scope_spans`).
        let resourceSpansLength = resourceField.count + Self.fieldLength(scopeSpansLength)
        var request: [UInt8] = []
        request.reserveCapacity(Self.fieldLength(resourceSpansLength))
        // ExportTraceServiceRequest: the resource spans (field 1, `resource_spans`).
        Self.appendKey(field: 1, length: resourceSpansLength, to: &request)
        request += resourceField
        Self.appendKey(field: 2, length: scopeSpansLength, to: &request)
        request += scopeField
        request += spansBytes
        return request
    }

    /// A length-delimited field's key (field number, wire type 2) and length, as protobuf's
    /// encoding defines them.
    static func appendKey(field: UInt8, length: Int, to bytes: inout [UInt8]) {
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

    /// `finished`'s bytes as OTLP's span, appended to `bytes`; `traceID` is its trace id's bytes.
    /// swift-protobuf encodes its fields before the attributes (1 to 8) and after them (10 on:
    /// events, links, status), and each attribute (`EncodedAttributes`); the attributes are
    /// framed between.
    private mutating func span(_ finished: FinishedSpan, traceID: Data, into bytes: inout [UInt8]) throws {
        var head = ProtoSpan()
        head.traceID = traceID
        head.spanID = Self.id(finished.identity.spanID)
        if finished.parentID != 0 { head.parentSpanID = Self.id(finished.parentID) }
        if let state = finished.identity.traceState { head.traceState = state }
        head.name = finished.name
        head.kind = Self.kind(finished.kind)
        head.startTimeUnixNano = finished.start
        head.endTimeUnixNano = finished.end
        bytes += try head.serializedBytes() as [UInt8]
        try attributes.append(finished.attributes, of: finished.name, to: &bytes)
        if !finished.events.isEmpty || !finished.links.isEmpty || finished.status != nil {
            var tail = ProtoSpan()
            Self.setFields(after: finished, on: &tail)
            bytes += try tail.serializedBytes() as [UInt8]
        }
    }

    /// The fields after the attributes: events, links and status.
    private static func setFields(after finished: FinishedSpan, on span: inout ProtoSpan) {
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

    private static func keyValues(_ attributes: SpanFields) -> [ProtoKeyValue] {
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

    static func value(_ attribute: SpanAttribute) -> ProtoValue? {
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

/// Span attributes' `KeyValue`s as swift-protobuf encodes them, kept for the next span of the
/// same name: the spans of one name set the same keys in the same order, and most of their
/// values are few (a relay's name, a status, a profile, a cache hit). Each position of a name's
/// attributes keeps its last `valuesKept` encodings, found again by comparing the key and the
/// value: a span costs one lookup of its name, not a hash of each attribute. A position whose
/// value is new each time (an `apns-id`, a size) stops being compared after `missesBeforeRest`
/// misses in a row, for `restSpans` spans. Bounded: `maximumNames` names, `maximumPositions`
/// positions, `valuesKept` values each, `maximumBytes` an encoding. Keys and strings are compared
/// by their UTF-8 bytes: Swift's strings are equal when canonically equivalent ("é" composed or
/// not), and a kept encoding must be the one these bytes make.
struct EncodedAttributes {
    static let maximumNames = 64
    static let maximumPositions = 32
    static let valuesKept = 4
    static let maximumBytes = 256
    static let missesBeforeRest = 16
    static let restSpans = 1024

    /// The values kept: scalars (an array attribute is encoded each time).
    private enum Scalar {
        case string(String)
        case int(Int64)
        case bool(Bool)
        case double(UInt64)

        init?(_ attribute: SpanAttribute) {
            switch attribute {
            case .string(let text): self = .string(text)
            // Both are OTLP's `int_value`: the same bytes.
            case .int64(let number): self = .int(number)
            case .int32(let number): self = .int(Int64(number))
            case .bool(let flag): self = .bool(flag)
            case .double(let number): self = .double(number.bitPattern)
            default: return nil
            }
        }

        /// Whether the two encode to the same bytes.
        func encodesAs(_ other: Scalar) -> Bool {
            switch (self, other) {
            case let (.string(a), .string(b)): a.hasSameBytes(as: b)
            case let (.int(a), .int(b)): a == b
            case let (.bool(a), .bool(b)): a == b
            case let (.double(a), .double(b)): a == b
            default: false
            }
        }
    }

    private struct Kept {
        var key: String
        var value: Scalar
        var bytes: [UInt8]
    }

    /// One position's last encodings, the oldest replaced first.
    private struct Position {
        var kept: [Kept] = []
        var next = 0
        /// Misses in a row; from `missesBeforeRest`, the spans left before comparing again.
        var misses = 0
        var resting = 0

        mutating func keep(_ encoding: Kept) {
            if kept.count < EncodedAttributes.valuesKept {
                kept.append(encoding)
            } else {
                kept[next] = encoding
                next = (next + 1) % EncodedAttributes.valuesKept
            }
        }
    }

    private var byName: [String: [Position]] = [:]

    /// Appends `fields` to a span named `name` as its field 9 (`attributes`), each a `KeyValue`;
    /// a value OTLP has no type for is left out.
    mutating func append(_ fields: SpanFields, of name: String, to bytes: inout [UInt8]) throws {
        guard fields.count > 0 else { return }
        if byName.count < Self.maximumNames {
            try Self.append(fields, positions: &byName[name, default: []], to: &bytes)
        } else if byName[name] != nil {
            try Self.append(fields, positions: &byName[name]!, to: &bytes)
        } else {
            var unkept: [Position] = []
            try Self.append(fields, positions: &unkept, to: &bytes)
        }
    }

    private static func append(_ fields: SpanFields, positions: inout [Position], to bytes: inout [UInt8]) throws {
        for index in fields.fields.indices {
            guard let pair = try encoded(fields, at: index, positions: &positions) else { continue }
            OTLPEncoding.appendKey(field: 9, length: pair.count, to: &bytes)
            bytes += pair
        }
    }

    /// The `index`th attribute's `KeyValue`: kept, or encoded (and kept).
    private static func encoded(_ fields: SpanFields, at index: Int, positions: inout [Position]) throws -> [UInt8]? {
        guard index < maximumPositions else { return try encode(fields.fields[index]) }
        while positions.count <= index { positions.append(Position()) }
        if positions[index].resting > 0 {
            positions[index].resting -= 1
            return try encode(fields.fields[index])
        }
        guard let value = Scalar(fields.fields[index].value) else { return try encode(fields.fields[index]) }
        for kept in positions[index].kept.indices
        where positions[index].kept[kept].value.encodesAs(value)
            && positions[index].kept[kept].key.hasSameBytes(as: fields.fields[index].key)
        {
            positions[index].misses = 0
            return positions[index].kept[kept].bytes
        }
        guard let bytes = try encode(fields.fields[index]) else { return nil }
        positions[index].misses += 1
        if positions[index].misses >= missesBeforeRest {
            positions[index].misses = 0
            positions[index].resting = restSpans
        }
        if bytes.count <= maximumBytes {
            positions[index].keep(Kept(key: fields.fields[index].key, value: value, bytes: bytes))
        }
        return bytes
    }

    private static func encode(_ field: SpanFields.Field) throws -> [UInt8]? {
        guard let value = OTLPEncoding.value(field.value) else { return nil }
        var pair = ProtoKeyValue()
        pair.key = field.key
        pair.value = value
        return try pair.serializedBytes()
    }
}
