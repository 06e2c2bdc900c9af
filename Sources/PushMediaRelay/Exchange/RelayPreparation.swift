import NIOCore
import PushMedia
import Tracing

/// The body a relay forwards and what was done to it.
struct RelayPrepared: Sendable {
    var body: ByteBuffer
    /// `x-pushmedia-outcome`: the pipeline's `status[/reason]`, or `skipped/<why>`.
    var label: String
    var handling: RelayHandling

    /// `body` forwarded as it came, for `why`.
    static func untouched(_ body: ByteBuffer, _ why: String) -> RelayPrepared {
        RelayPrepared(body: body, label: "skipped/" + why, handling: .passthrough)
    }
}

/// A prepared body now, or once the pipeline is done.
enum RelayPreparation {
    case ready(RelayPrepared)
    case later(EventLoopFuture<RelayPrepared>)
}

/// What a relayed request's media goes through: the same pipeline, cache and memo as
/// `/v1/process`, and the same metrics.
struct RelayMedia: Sendable {
    let pipeline: Pipeline
    let answers: RepeatAnswers
    let metrics: any RelayMetrics
    /// The public base URL of the stored media, known once the hook listens.
    let baseURL: @Sendable () -> String

    init(parts: RelayParts) {
        pipeline = parts.pipeline
        answers = parts.answers
        metrics = parts.metrics
        baseURL = parts.baseURL
    }

    /// The rewrite kept for `key`, as it is or with `finish` applied to its bytes.
    func fromMemo(_ key: RepeatAnswers.Key, finish: (([UInt8]) -> ByteBuffer)? = nil) -> RelayPrepared? {
        guard let ready = answers.payload(key, pipeline: pipeline) else { return nil }
        metrics.record(ready.outcome)
        let body = finish.map { $0(ready.bytes) } ?? ready.buffer
        return RelayPrepared(body: body, label: ready.outcome.label, handling: .memo)
    }

    /// `payload` through the pipeline: its first half (`Pipeline.begin`) at once, on the event
    /// loop, which answers when the store remembers its media fresh (a campaign's requests after
    /// its job); else the second half (`Pipeline.finish`) in a task. Both in `span`'s context:
    /// the pipeline's spans go under it, and its log lines carry its ids. The rewrite is kept in
    /// the memo under `key` and forwarded with `finish` applied; a payload the pipeline skipped
    /// goes as `body` came.
    func rewrite(
        _ payload: JSONObject, context: PayloadContext, sizeAtMost: Int, key: RepeatAnswers.Key, body: ByteBuffer,
        on eventLoop: any EventLoop, span: (any Span)?, finish: (@Sendable ([UInt8]) -> ByteBuffer)? = nil
    ) -> RelayPreparation {
        PipelineTrace.within(span) {
            switch pipeline.begin(payload, context: context, sizeAtMost: sizeAtMost) {
            case let .done(result):
                return .ready(prepared(result, key: key, body: body, finish: finish))
            case let .pending(pending):
                // The task takes the context it is made in.
                let promise = eventLoop.makePromise(of: RelayPrepared.self)
                promise.completeWithTask {
                    self.prepared(await self.pipeline.finish(pending), key: key, body: body, finish: finish)
                }
                return .later(promise.futureResult)
            }
        }
    }

    private func prepared(
        _ result: PipelineResult, key: RepeatAnswers.Key, body: ByteBuffer, finish: (([UInt8]) -> ByteBuffer)?
    ) -> RelayPrepared {
        metrics.record(result.outcome)
        let label = result.outcome.label
        guard result.outcome.status != .skipped else {
            return RelayPrepared(body: body, label: label, handling: .passthrough)
        }
        let rewritten = answers.keepPayload(key, result: result) ?? result.bytes
        return RelayPrepared(
            body: finish.map { $0(rewritten) } ?? ByteBuffer(bytes: rewritten), label: label, handling: .processed)
    }
}
