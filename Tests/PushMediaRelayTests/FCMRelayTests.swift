import Foundation
import NIOCore
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaRelay

/// The FCM relay's parts that need no network; the relay runs end to end, with real FCM
/// clients, in `scripts/fcm-relay.sh`.
@Suite("FCM relay parts")
struct FCMRelayTests {
    @Test func sendPath() {
        #expect(FCMPolicy.project(ofSendPath: "/v1/projects/my-app-123/messages:send") == "my-app-123")
        #expect(FCMPolicy.project(ofSendPath: "/v1/projects//messages:send") == nil)
        #expect(FCMPolicy.project(ofSendPath: "/v1/projects/p/messages:batchSend") == nil)
        #expect(FCMPolicy.project(ofSendPath: "/v1/projects/p/messages:send/x") == nil)
        #expect(FCMPolicy.project(ofSendPath: "/v2/projects/p/messages:send") == nil)
    }

    /// The kept rewrite of a campaign's message gets each message's own target back.
    @Test func targetPutBack() throws {
        let rewritten = Array(#"{"message":{"notification":{"image":"https://m/1.jpg"}}}"#.utf8)
        let token = FCMPolicy.withTarget(rewritten, Array(#""token":"device-1""#.utf8))
        #expect(
            String(buffer: token) == #"{"message":{"token":"device-1","notification":{"image":"https://m/1.jpg"}}}"#)
        let empty = FCMPolicy.withTarget(Array(#"{"message":{}}"#.utf8), Array(#""topic":"news""#.utf8))
        #expect(String(buffer: empty) == #"{"message":{"topic":"news"}}"#)
        // Another layout: parsed and set.
        let spaced = FCMPolicy.withTarget(
            Array(#"{ "message": {"data": {"k": "v"}} }"#.utf8), Array(#""token" : "t""#.utf8))
        let message = try #require(
            try JSONValue.parse(Array(spaced.readableBytesView)).objectValue?["message"]?.objectValue)
        #expect(message["token"] == .string("t") && message["data"] != nil)
        #expect(FCMPolicy.withTarget(rewritten, nil) == ByteBuffer(bytes: rewritten))
    }

    /// The scan finds the one target and cuts it out with one comma, in any layout; requests it
    /// does not take are left to the parser.
    @Test(arguments: [
        (#"{"message":{"token":"t1","data":{"k":"v"}}}"#, #""token":"t1""#, #"{"message":{"data":{"k":"v"}}}"#),
        (#"{"message":{"data":{"k":"}{"},"topic":"news"}}"#, #""topic":"news""#, #"{"message":{"data":{"k":"}{"}}}"#),
        (
            #"{ "message" : { "a" : [1, {"b": null}] , "condition" : "'x' in topics" , "c" : true } }"#,
            #""condition" : "'x' in topics""#, #"{ "message" : { "a" : [1, {"b": null}] ,  "c" : true } }"#
        ),
        (#"{"message":{"token":"t\"\u00e9"}}"#, #""token":"t\"\u00e9""#, #"{"message":{}}"#),
    ])
    func targetFoundByScan(request: String, member: String, rest: String) throws {
        let found = try #require(FCMTarget(scanning: Array(request.utf8)))
        #expect(String(decoding: found.member, as: UTF8.self) == member)
        #expect(String(buffer: found.rest) == rest)
        // The rest is the message without its target, and the target goes back where the relay puts it.
        let parsedRest = try JSONValue.parse(Array(found.rest.readableBytesView))
        var message = try #require(try JSONValue.parse(Array(request.utf8)).objectValue?["message"]?.objectValue)
        for key in FCMPolicy.targets { message.removeValue(forKey: key) }
        #expect(parsedRest.objectValue?["message"] == .object(message))
    }

    @Test(arguments: [
        #"{"message":{"data":{}}}"#,  // no target
        #"{"message":{"token":"a","topic":"b"}}"#,  // two
        #"{"message":{"token":5}}"#,  // not a string
        #"{"message":{"token":"a"},"validate_only":true}"#,
        #"{"message":{"tok\u0065n":"a"}}"#,  // an escaped key
        #"{"message":{"token":"a\x"}}"#,  // a bad escape
        #"{"message":{"token":"a"}} x"#,  // bytes after the request
        #"{"message":{"token":"a","data":{"k":"v"}"#,  // cut short
        #"[{"message":{"token":"a"}}]"#,
        "",
    ])
    func requestsLeftToTheParser(request: String) {
        #expect(FCMTarget(scanning: Array(request.utf8)) == nil)
    }

    @Test func errorsHaveGooglesShape() throws {
        let answer = FCMPolicy.error(404, "NOT_FOUND", "no such method")
        #expect(answer.status == 404)
        #expect(answer.headers.first(name: "content-type")?.hasPrefix("application/json") == true)
        let body = try #require(answer.body.map { Array($0.readableBytesView) })
        let error = try #require(try JSONValue.parse(body).objectValue?["error"]?.objectValue)
        #expect(error["code"] == .number("404") && error["status"] == .string("NOT_FOUND"))
        #expect(error["message"] == .string("no such method"))
        #expect(isConnectionHeader("Host") && isConnectionHeader(":path"))
        #expect(!isConnectionHeader("authorization"))
    }

    @Test func settings() throws {
        var config = RelaysConfig()
        try config.set("fcm-port", to: "0")
        try config.fcm.validate()
        #expect(config.fcm.upstreamEndpoint == UpstreamEndpoint(host: "fcm.googleapis.com", port: 443))
        try config.set("fcm-upstream", to: "https://127.0.0.1:9443")
        #expect(config.fcm.upstreamEndpoint == UpstreamEndpoint(host: "127.0.0.1", port: 9443))
        #expect { try config.set("fcm-upstream", to: "http://x") } throws: { "\($0)".contains("--fcm-upstream") }
        #expect { try config.set("fcm-allow-project", to: "bad project") } throws: { "\($0)".contains("project") }
        try config.set("fcm-allow-project", to: "my-app-1,other-2")
        #expect(config.fcm.allowedProjects == ["my-app-1", "other-2"])
    }
}
