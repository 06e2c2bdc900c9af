import Hummingbird
import NIOCore

/// The request context of every route, under the name the Hummingbird 2 template gives it:
/// Hummingbird's basic context and the connection's event loop.
public struct AppRequestContext: RequestContext, ConnectionContext {
    public var coreContext: CoreRequestContextStorage
    public let eventLoop: any EventLoop

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        eventLoop = source.channel.eventLoop
    }
}

/// A request context that knows its connection's event loop. An answer written piece by piece
/// from another task waits on it now and then: a write is handed to the event loop and returns
/// before the loop has seen it, so without that wait the writes run ahead of the socket and pile
/// up in memory (`StoredMedia`).
public protocol ConnectionContext: RequestContext {
    var eventLoop: any EventLoop { get }
}
