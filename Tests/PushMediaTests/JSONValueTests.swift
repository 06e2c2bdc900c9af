import PushMediaTestSupport
import Testing

@testable import PushMedia

// MARK: - Helpers

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

private func parseError(_ input: [UInt8], maxDepth: Int = 128) -> JSONParseError? {
    do {
        _ = try JSONValue.parse(input, maxDepth: maxDepth)
        return nil
    } catch {
        return error
    }
}

private func parseError(_ input: String, maxDepth: Int = 128) -> JSONParseError? {
    parseError(bytes(input), maxDepth: maxDepth)
}

private func num(_ literal: String) -> JSONValue { .number(literal) }

// MARK: - Round trips

private let apnsPayload =
    #"{"aps":{"alert":{"title":"Café ☕","subtitle":"Ünïcödé","body":"Tap to see 🎉 the \"new\" photo"},"badge":1,"sound":"default","mutable-content":1,"category":"MEDIA_ATTACHMENT","thread-id":"a/b"},"media_url":"https://cdn.example.com/img/42.jpg?w=600&h=300","ratio":1.0,"offset":-0,"big":12345678901234567890,"exp":1E+3,"tiny":-1.5e-7,"nothing":null,"flags":[true,false],"empty":{},"none":[],"ct_mediaType":"image"}"#

@Test func realisticPayloadRoundTripsByteForByte() throws {
    let input = bytes(apnsPayload)
    let value = try JSONValue.parse(input)
    #expect(value.serialized() == input)

    let object = try #require(value.objectValue)
    #expect(
        object.keys == [
            "aps", "media_url", "ratio", "offset", "big", "exp", "tiny",
            "nothing", "flags", "empty", "none", "ct_mediaType",
        ])
    let aps = try #require(object["aps"]?.objectValue)
    #expect(aps.keys == ["alert", "badge", "sound", "mutable-content", "category", "thread-id"])
    #expect(aps["alert"]?.objectValue?.keys == ["title", "subtitle", "body"])
    #expect(object["ratio"] == num("1.0"))
    #expect(object["offset"] == num("-0"))
    #expect(object["big"] == num("12345678901234567890"))
    #expect(object["exp"] == num("1E+3"))
    #expect(object["tiny"] == num("-1.5e-7"))
    #expect(object["nothing"] == .null)
    #expect(object["empty"] == .object(JSONObject()))
    #expect(object["none"] == .array([]))
    #expect(aps["alert"]?.objectValue?["body"]?.stringValue == "Tap to see 🎉 the \"new\" photo")
}

@Test func whitespaceIsDroppedButEverythingElseKept() throws {
    let spaced = " \n\t{ \"b\" : [ 1.0 , 1e3 ,\r\n -0 ] ,\n \"a\" : { } } \n"
    let value = try JSONValue.parse(bytes(spaced))
    #expect(text(value.serialized()) == #"{"b":[1.0,1e3,-0],"a":{}}"#)
}

@Test func editingOneKeyPreservesTheRest() throws {
    var object = try #require(try JSONValue.parse(bytes(apnsPayload)).objectValue)
    object["media_url"] = .string("https://proxy.example.com/42.jpg")
    let output = text(JSONValue.object(object).serialized())
    let expected = apnsPayload.replacing(
        "https://cdn.example.com/img/42.jpg?w=600&h=300", with: "https://proxy.example.com/42.jpg")
    #expect(expected != apnsPayload)
    #expect(output == expected)
}

@Test func prettySerializationLayout() throws {
    let value = try JSONValue.parse(bytes(#"{"a":[1,{}],"b":{"c":null,"d":"x\ny"},"e":[]}"#))
    let expected = """
        {
          "a": [
            1,
            {}
          ],
          "b": {
            "c": null,
            "d": "x\\ny"
          },
          "e": []
        }

        """
    #expect(text(value.prettySerialized()) == expected)
    #expect(try JSONValue.parse(value.prettySerialized()) == value)
    #expect(text(JSONValue.number("7").prettySerialized()) == "7\n")
    #expect(text(JSONValue.array([]).prettySerialized()) == "[]\n")
}

@Test func scalarsAtTopLevel() throws {
    #expect(try JSONValue.parse(bytes("null")) == .null)
    #expect(try JSONValue.parse(bytes(" true ")) == .bool(true))
    #expect(try JSONValue.parse(bytes("false")) == .bool(false))
    #expect(try JSONValue.parse(bytes("\"\"")) == .string(""))
    #expect(try JSONValue.parse(bytes("-0.0E-0")) == num("-0.0E-0"))
    #expect(try JSONValue.parse(Array("[1]".utf8)[...]) == .array([num("1")]))
    #expect(try JSONValue.parse("[1]".utf8) == .array([num("1")]))
}

// MARK: - Unicode

@Test func escapedSurrogatePairBecomesUTF8() throws {
    let value = try JSONValue.parse(bytes(#""caf\u00e9 \ud83d\ude00 \u00C9\/""#))
    #expect(value == .string("café 😀 É/"))
    let expected: [UInt8] = [
        0x22, 0x63, 0x61, 0x66, 0xC3, 0xA9, 0x20, 0xF0, 0x9F, 0x98, 0x80,
        0x20, 0xC3, 0x89, 0x2F, 0x22,
    ]
    #expect(value.serialized() == expected)
}

@Test func rawUnicodeRoundTrips() throws {
    let input = #"["Crème brûlée","👍🏽","日本語","\u0000","\#u{FFFF}","\#u{10FFFF}"]"#
    let value = try JSONValue.parse(bytes(input))
    #expect(value.arrayValue?.count == 6)
    #expect(value.arrayValue?[1] == .string("👍🏽"))
    #expect(value.arrayValue?[3] == .string("\u{0}"))
    #expect(text(value.serialized()) == input)
}

@Test func keysAreComparedByScalarsNotCanonicalEquivalence() throws {
    let value = try JSONValue.parse(bytes("{\"\u{E9}\":1,\"e\u{301}\":2}"))
    let object = try #require(value.objectValue)
    #expect(object.count == 2)
    #expect(object["\u{E9}"] == num("1"))
    #expect(object["e\u{301}"] == num("2"))
    #expect(JSONValue.string("\u{E9}") != JSONValue.string("e\u{301}"))
}

// MARK: - Escaping

@Test func controlCharactersAreEscaped() throws {
    let value = JSONValue.string("a\"b\\c\u{8}\u{C}\n\r\t\u{1}\u{1F}\u{7F}/é")
    let expected = #""a\"b\\c\b\f\n\r\t\u0001\u001f"# + "\u{7F}/é\""
    #expect(text(value.serialized()) == expected)
    #expect(value.serialized().count == Array(expected.utf8).count)
    #expect(try JSONValue.parse(value.serialized()) == value)

    let key = JSONValue.object(JSONObject([("k\n\u{0}", .string("\u{1B}"))]))
    #expect(text(key.serialized()) == #"{"k\n\u0000":"\u001b"}"#)
}

@Test func serializedCountIsTheCompactByteCount() throws {
    let value = try JSONValue.parse(bytes(apnsPayload))
    #expect(value.serialized().count == apnsPayload.utf8.count)
    #expect(apnsPayload.utf8.count != apnsPayload.count)  // the payload has multi-byte characters

    let built = JSONValue.object(
        JSONObject([
            ("aps", .object(JSONObject([("alert", .string("é\t😀")), ("badge", num("3"))]))),
            ("list", .array([.null, .bool(true), .bool(false), .string("")])),
        ]))
    let expected = "{\"aps\":{\"alert\":\"é\\t😀\",\"badge\":3},\"list\":[null,true,false,\"\"]}"
    #expect(text(built.serialized()) == expected)
    #expect(built.serialized().count == expected.utf8.count)
    #expect(built.compactByteCount == expected.utf8.count)
    #expect(JSONValue.string("\u{1}\"").compactByteCount == 10)
}

// MARK: - Errors with positions

@Test func unexpectedEnd() {
    #expect(parseError("{\"a\": [1, 2") == JSONParseError(reason: .unexpectedEnd, offset: 11, line: 1, column: 12))
    #expect(parseError("") == JSONParseError(reason: .unexpectedEnd, offset: 0, line: 1, column: 1))
    #expect(parseError(" \n ")?.reason == .unexpectedEnd)
    #expect(parseError("\"abc")?.reason == .unexpectedEnd)
    #expect(parseError("{\"a\"")?.reason == .unexpectedEnd)
    #expect(parseError("tr")?.reason == .unexpectedEnd)
    #expect(parseError(#""\u12"#)?.reason == .unexpectedEnd)
    #expect(parseError([0x22, 0xE2, 0x82])?.reason == .unexpectedEnd)
}

@Test func unexpectedCharacter() {
    let error = parseError("[1,\n 2,\n ]")
    #expect(error == JSONParseError(reason: .unexpectedCharacter, offset: 9, line: 3, column: 2, detail: "\"]\""))
    #expect(error?.description == "line 3, column 2: unexpected character \"]\"")
    #expect(parseError("{'a':1}")?.reason == .unexpectedCharacter)
    #expect(parseError("{\"a\" 1}")?.reason == .unexpectedCharacter)
    #expect(parseError("[1 2]")?.reason == .unexpectedCharacter)
    #expect(parseError("nul1")?.reason == .unexpectedCharacter)
    #expect(parseError("NaN")?.reason == .unexpectedCharacter)
    #expect(parseError(".5")?.reason == .unexpectedCharacter)
    #expect(parseError("+1")?.reason == .unexpectedCharacter)
    #expect(
        parseError("[0x10]")
            == JSONParseError(reason: .unexpectedCharacter, offset: 2, line: 1, column: 3, detail: "\"x\""))
    #expect(parseError("{,}")?.reason == .unexpectedCharacter)
    #expect(parseError("[1,]")?.reason == .unexpectedCharacter)
    #expect(parseError("{\"a\":1,}")?.reason == .unexpectedCharacter)
    #expect(parseError("[\u{1}]")?.detail == "\"\\u0001\"")
}

@Test func byteOrderMarkIsRejected() {
    let error = parseError([0xEF, 0xBB, 0xBF] + bytes("{}"))
    #expect(error?.reason == .unexpectedCharacter)
    #expect(error?.offset == 0)
    #expect(error?.line == 1)
    #expect(error?.column == 1)
}

@Test func invalidNumbers() throws {
    let error = parseError("{\"badge\": 01}")
    #expect(error == JSONParseError(reason: .invalidNumber, offset: 10, line: 1, column: 11, detail: "01"))
    #expect(error?.description == "line 1, column 11: invalid number \"01\"")
    for bad in ["-", "1.", "1.e3", "1e", "1e+", "-01", "00", "1.2.3", "1e5e2", "-.5", "2-1", "[1.]", "-Infinity"] {
        #expect(parseError(bad)?.reason == .invalidNumber, "\(bad)")
    }
    for good in ["0", "-0", "0.5", "10", "1e3", "1E+3", "1e-3", "-12.5E+10", "12345678901234567890"] {
        #expect(try JSONValue.parse(bytes(good)) == num(good))
    }
}

@Test func invalidEscapes() {
    let error = parseError(#"["ok", "\x"]"#)
    #expect(error == JSONParseError(reason: .invalidEscape, offset: 8, line: 1, column: 9, detail: #"\x"#))
    #expect(parseError(#""\u12G4""#)?.reason == .invalidEscape)
    #expect(parseError(#""\U0041""#)?.reason == .invalidEscape)
    #expect(parseError(#""\'""#)?.reason == .invalidEscape)
}

@Test func invalidUTF8() {
    #expect(
        parseError([0x22, 0xC0, 0xAF, 0x22])
            == JSONParseError(reason: .invalidUTF8, offset: 1, line: 1, column: 2, detail: "0xC0"))
    #expect(parseError([0x22, 0xED, 0xA0, 0x80, 0x22])?.detail == "0xED 0xA0")
    // Overlong, UTF-8-encoded surrogate, above U+10FFFF, lone continuation, bad lead, truncated.
    let cases: [[UInt8]] = [
        [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80],
        [0xE0, 0x80, 0xAF], [0xF0, 0x80, 0x80, 0xAF], [0xF5, 0x80, 0x80, 0x80],
        [0xFF], [0xE2, 0x82], [0xC3, 0x41],
    ]
    for sequence in cases {
        let error = parseError(bytes("{\"k\":\"a") + sequence + bytes("\"}"))
        #expect(error?.reason == .invalidUTF8, "\(sequence)")
        #expect(error?.offset == 7, "\(sequence)")
    }
    // The largest valid 2-, 3- and 4-byte forms are accepted.
    #expect(parseError([0x22, 0xDF, 0xBF, 0xEF, 0xBF, 0xBF, 0xF4, 0x8F, 0xBF, 0xBF, 0x22]) == nil)
}

@Test func controlCharacterInString() {
    let error = parseError("{\"a\":\"x\ty\"}")
    #expect(
        error
            == JSONParseError(
                reason: .controlCharacterInString, offset: 7, line: 1, column: 8,
                detail: "\"\\t\""))
    let newline = parseError("[\n\"line1\nline2\"]")
    #expect(newline?.reason == .controlCharacterInString)
    #expect(newline?.line == 2)
    #expect(newline?.column == 7)
}

@Test func duplicateKeys() throws {
    let input = """
        {
          "aps": {},
          "media_url": "a",
          "media_url": "b"
        }
        """
    let error = parseError(input)
    #expect(error == JSONParseError(reason: .duplicateKey, offset: 37, line: 4, column: 3, detail: "media_url"))
    #expect(error?.description == "line 4, column 3: duplicate key \"media_url\"")
    // Same key in different objects is fine; escaped spelling of the same key is a duplicate.
    #expect(parseError(#"{"a":{"a":1},"b":[{"a":2},{"a":3}]}"#) == nil)
    #expect(parseError(#"{"a":1,"\u0061":2}"#)?.detail == "a")
    // Large objects use a hash index; duplicates are still found.
    let many = (0..<100).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
    #expect(parseError("{" + many + "}") == nil)
    #expect(parseError("{" + many + ",\"k42\":0}")?.detail == "k42")
}

@Test func deepNestingIsRejectedWithoutCrashing() throws {
    let deep = [UInt8](repeating: 0x5B, count: 100_000)
    #expect(
        parseError(deep)
            == JSONParseError(reason: .tooDeep, offset: 128, line: 1, column: 129, detail: "maximum depth 128"))
    let deepObjects = Array(String(repeating: "{\"a\":", count: 100_000).utf8)
    #expect(parseError(deepObjects)?.reason == .tooDeep)
    let deepBalanced = [UInt8](repeating: 0x5B, count: 100_000) + [UInt8](repeating: 0x5D, count: 100_000)
    #expect(parseError(deepBalanced)?.reason == .tooDeep)

    let atLimit = String(repeating: "[", count: 128) + String(repeating: "]", count: 128)
    #expect(parseError(atLimit) == nil)
    #expect(parseError("[[1]]", maxDepth: 2) == nil)
    #expect(parseError("[[[1]]]", maxDepth: 2)?.offset == 2)
    #expect(parseError("1", maxDepth: 0) == nil)
    #expect(parseError("{}", maxDepth: 0)?.reason == .tooDeep)
}

@Test func trailingData() {
    #expect(
        parseError("{\"a\":1} x")
            == JSONParseError(reason: .trailingData, offset: 8, line: 1, column: 9, detail: "\"x\""))
    #expect(parseError("1 2")?.offset == 2)
    #expect(parseError("truex")?.reason == .trailingData)
    #expect(parseError("{}}")?.reason == .trailingData)
    #expect(parseError("[]\n\n]")?.line == 3)
}

@Test func loneSurrogates() {
    #expect(
        parseError(#""\ud83d""#)
            == JSONParseError(reason: .loneSurrogate, offset: 1, line: 1, column: 2, detail: #"\ud83d"#))
    #expect(parseError(#""\ude00x""#)?.reason == .loneSurrogate)
    #expect(parseError(#""\ud83d\u0041""#)?.reason == .loneSurrogate)
    #expect(parseError(#""\ud83d\ud83d""#)?.reason == .loneSurrogate)
    #expect(parseError(#""\ud83dx""#)?.reason == .loneSurrogate)
}

// MARK: - JSONObject editing

@Test func subscriptSetReplaceRemoveKeepsOrder() {
    var object = JSONObject([("a", num("1")), ("b", num("2")), ("c", num("3"))])
    object["b"] = num("20")
    #expect(object.keys == ["a", "b", "c"])
    #expect(object["b"] == num("20"))

    object["d"] = num("4")
    #expect(object.keys == ["a", "b", "c", "d"])

    object["a"] = nil
    #expect(object.keys == ["b", "c", "d"])
    #expect(object["a"] == nil)

    #expect(object.removeValue(forKey: "c") == num("3"))
    #expect(object.removeValue(forKey: "missing") == nil)
    #expect(object.keys == ["b", "d"])

    object["a"] = .bool(true)
    #expect(object.keys == ["b", "d", "a"])
    #expect(object.count == 3)
    #expect(text(JSONValue.object(object).serialized()) == #"{"b":20,"d":4,"a":true}"#)
    #expect(object.members.map(\.value) == [num("20"), num("4"), .bool(true)])
}

@Test func initReplacesDuplicatesInPlace() {
    let object = JSONObject([("a", num("1")), ("b", num("2")), ("a", num("3"))])
    #expect(object.keys == ["a", "b"])
    #expect(object["a"] == num("3"))
    #expect(JSONObject().count == 0)
}

@Test func largeObjectEditingKeepsOrder() {
    var object = JSONObject((0..<40).map { ("k\($0)", num("\($0)")) })
    for i in stride(from: 0, to: 40, by: 3) { object["k\(i)"] = nil }
    object["k1"] = num("100")
    object["new"] = .null
    let expectedKeys = (0..<40).filter { $0 % 3 != 0 }.map { "k\($0)" } + ["new"]
    #expect(object.keys == expectedKeys)
    #expect(object["k1"] == num("100"))
    #expect(object["k39"] == nil)
    #expect(object["k38"] == num("38"))
    while let first = object.keys.first { object.removeValue(forKey: first) }
    #expect(object.count == 0)
}

@Test func equalityIsExact() throws {
    let ab = JSONValue.object(JSONObject([("a", num("1")), ("b", num("2"))]))
    let ba = JSONValue.object(JSONObject([("b", num("2")), ("a", num("1"))]))
    #expect(ab != ba)
    #expect(num("1.0") != num("1"))
    #expect(try JSONValue.parse(bytes(#"{"a":1,"b":2}"#)) == ab)
}

// MARK: - Accessors

@Test func accessors() {
    #expect(JSONValue.string("x").stringValue == "x")
    #expect(JSONValue.null.stringValue == nil)
    #expect(JSONValue.bool(false).boolValue == false)
    #expect(JSONValue.number("1").boolValue == nil)
    #expect(JSONValue.array([.null]).arrayValue == [.null])
    #expect(JSONValue.object(JSONObject()).objectValue == JSONObject())
    #expect(JSONValue.string("1").intValue == nil)
    #expect(num("42").intValue == 42)
    #expect(num("-0").intValue == 0)
    #expect(num("-17").intValue == -17)
    #expect(num("9223372036854775807").intValue == Int.max)
    #expect(num("-9223372036854775808").intValue == Int.min)
    #expect(num("9223372036854775808").intValue == nil)
    #expect(num("12345678901234567890").intValue == nil)
    #expect(num("1.0").intValue == nil)
    #expect(num("1e3").intValue == nil)
    #expect(num("+1").intValue == nil)
    #expect(num("-").intValue == nil)
}
