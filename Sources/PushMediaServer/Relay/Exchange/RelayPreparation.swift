import NIOCore
import PushMedia

/// The body a relay forwards and what was done to it.
struct RelayPrepared: Sendable {
    var body: ByteBuffer
    /// `x-pushmedia-outcome`: the pipeline's `status[/reason]`, or `skipped/<why>`.
    var label: String
    /// `processed` (the pipeline ran), `memo` (a kept answer), `passthrough` (untouched).
    var handling: String
}

/// A prepared body now, or once the pipeline is done.
enum RelayPreparation {
    case ready(RelayPrepared)
    case later(EventLoopFuture<RelayPrepared>)
}

/// A relay whose requests' media go through the pipeline and the repeated-body memo.
protocol RewritingRelay: RelayEndpoint {
    var pipeline: Pipeline { get }
    var memo: ResponseMemo { get }
    var metrics: ServerMetrics { get }
}

extension RewritingRelay {
    /// The rewrite kept for `key`, `finish` applied to its bytes.
    func fromMemo(_ key: ResponseMemo.Key, finish: ([UInt8]) -> [UInt8] = { $0 }) -> RelayPrepared? {
        guard let ready = memo.payload(key, pipeline: pipeline) else { return nil }
        metrics.record(ready.outcome)
        return RelayPrepared(
            body: ByteBuffer(bytes: finish(ready.bytes)), label: ProcessRoutes<AppRequestContext>.label(ready.outcome),
            handling: "memo")
    }

    /// `payload` through the pipeline: its first half (`Pipeline.begin`) at once, on the event
    /// loop, which answers when the store remembers its media fresh (a campaign's requests after
    /// its job); else the second half (`Pipeline.finish`) in a task. The rewrite is kept in the
    /// memo under `key` and forwarded with `finish` applied; a payload the pipeline skipped goes
    /// as `body` came.
    func rewrite(
        _ payload: JSONObject, context: PayloadContext, sizeAtMost: Int, key: ResponseMemo.Key, body: ByteBuffer,
        on eventLoop: any EventLoop, finish: @escaping @Sendable ([UInt8]) -> [UInt8] = { $0 }
    ) -> RelayPreparation {
        switch pipeline.begin(payload, context: context, sizeAtMost: sizeAtMost) {
        case let .done(result):
            return .ready(prepared(result, key: key, body: body, finish: finish))
        case let .pending(pending):
            let promise = eventLoop.makePromise(of: RelayPrepared.self)
            promise.completeWithTask {
                self.prepared(await self.pipeline.finish(pending), key: key, body: body, finish: finish)
            }
            return .later(promise.futureResult)
        }
    }

    private func prepared(
        _ result: PipelineResult, key: ResponseMemo.Key, body: ByteBuffer, finish: ([UInt8]) -> [UInt8]
    ) -> RelayPrepared {
        metrics.record(result.outcome)
        let label = ProcessRoutes<AppRequestContext>.label(result.outcome)
        guard result.outcome.status != .skipped else {
            return RelayPrepared(body: body, label: label, handling: "passthrough")
        }
        let rewritten = memo.keepPayload(key, result: result) ?? result.bytes
        return RelayPrepared(body: ByteBuffer(bytes: finish(rewritten)), label: label, handling: "processed")
    }
}
