import Foundation
import Tracing

/// A span's attributes as a short list, in the order they were set: what PushMedia's spans carry
/// (a dozen at most), set and read without hashing. A key set again takes its new value in its
/// place; a key set to nil is removed.
public struct SpanFields: Sendable, ExpressibleByDictionaryLiteral {
    /// One attribute.
    public struct Field: Sendable {
        public var key: String
        public var value: SpanAttribute
    }

    /// The attributes, in the order they were first set.
    public private(set) var fields: [Field] = []

    public init(minimumCapacity: Int = 0) {
        fields.reserveCapacity(minimumCapacity)
    }

    /// The same attributes as `attributes`.
    public init(_ attributes: SpanAttributes) {
        self.init(minimumCapacity: attributes.count)
        // SpanAttributes is not a Sequence: its own forEach.
        // swift-format-ignore: ReplaceForEachWithForLoop
        attributes.forEach { key, value in set(key, value) }
    }

    public init(dictionaryLiteral elements: (String, SpanAttribute)...) {
        self.init(minimumCapacity: elements.count)
        for (key, value) in elements { set(key, value) }
    }

    public var count: Int { fields.count }

    /// The value set for `key`; setting it is `set(_:_:)`. (The subscripts below take the types
    /// PushMedia's spans carry without boxing them in an existential: they are chosen first.)
    @_disfavoredOverload
    public subscript(key: String) -> (any SpanAttributeConvertible)? {
        get { get(key) }
        set { set(key, newValue?.toSpanAttribute()) }
    }

    public subscript(key: String) -> String? {
        get { if case let .string(text)? = get(key) { text } else { nil } }
        set { set(key, newValue?.toSpanAttribute()) }
    }

    public subscript(key: String) -> Int? {
        get { if case let .int64(number)? = get(key) { Int(number) } else { nil } }
        set { set(key, newValue?.toSpanAttribute()) }
    }

    public subscript(key: String) -> Bool? {
        get { if case let .bool(flag)? = get(key) { flag } else { nil } }
        set { set(key, newValue?.toSpanAttribute()) }
    }

    public func get(_ key: String) -> SpanAttribute? {
        index(of: key).map { fields[$0].value }
    }

    public mutating func set(_ key: String, _ value: SpanAttribute?) {
        if let index = index(of: key) {
            if let value { fields[index].value = value } else { fields.remove(at: index) }
        } else if let value {
            fields.append(Field(key: key, value: value))
        }
    }

    /// Reads each field's key in place (a closure over the elements would copy each value). Keys
    /// are the same when their bytes are, as OTLP sends them: "é" composed and not, which Swift
    /// calls equal, are two keys.
    private func index(of key: String) -> Int? {
        for index in fields.indices where fields[index].key.hasSameBytes(as: key) { return index }
        return nil
    }

    /// The same attributes as swift-distributed-tracing's set.
    public var attributes: SpanAttributes {
        var attributes = SpanAttributes()
        attributes.reserveCapacity(fields.count)
        for index in fields.indices { attributes.set(fields[index].key, value: fields[index].value) }
        return attributes
    }
}

/// The base class of spans that keep their attributes as `SpanFields` and have their ids at hand
/// (the tracer's own): `editAttributes` and `PipelineTrace.logIDs(of:)` find one with a class
/// cast, which costs a fraction of asking the runtime whether a span's type conforms to a
/// protocol. A subclass overrides `editFields` and `logIDs`.
open class SpanFieldsOwner: @unchecked Sendable {
    public init() {}

    /// Calls `update` with the span's attributes to change, unless the span has ended.
    /// `update` must not read or set this span.
    open func editFields(_ update: (inout SpanFields) -> Void) {
        preconditionFailure("\(type(of: self)) does not override editFields(_:)")
    }

    /// The ids a log line written for the span carries (its own id as `parentID`), without
    /// making its context; nil for a span that is not recorded.
    open var logIDs: TraceParent? { nil }

    /// A span `name` under this one, started without making this span's context (which differs
    /// from the one this span was started in only by the span's identity); nil when the owner
    /// cannot, and the span's context then starts it (`PipelineTrace.child(_:of:ofKind:)`).
    open func child(_ name: String, ofKind kind: SpanKind) -> (any Span)? { nil }
}

extension Span {
    /// Changes the span's attributes in place: a list for the tracer's own spans
    /// (`SpanFieldsOwner`), the protocol's `attributes` for any other.
    public func editAttributes(_ update: (inout SpanFields) -> Void) {
        if let span = self as? SpanFieldsOwner { return span.editFields(update) }
        var fields = SpanFields(attributes)
        update(&fields)
        attributes = fields.attributes
    }

    /// Sets one attribute (`editAttributes`).
    public func setAttribute(_ key: String, _ value: some SpanAttributeConvertible) {
        editAttributes { $0.set(key, value.toSpanAttribute()) }
    }
}

extension String {
    /// Whether the two are the same UTF-8 bytes (`==` is canonical equivalence: "é" composed or
    /// not): the same representation (a small string's bytes inline, or one storage and length,
    /// as a key or value set from one literal is) without reading them, and strings of different
    /// lengths told apart without reading them either.
    package func hasSameBytes(as other: String) -> Bool {
        if unsafeBitCast(self, to: (UInt64, UInt64).self) == unsafeBitCast(other, to: (UInt64, UInt64).self) {
            return true
        }
        guard utf8.count == other.utf8.count else { return false }
        var (a, b) = (self, other)
        return a.withUTF8 { a in
            b.withUTF8 { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
        }
    }
}
