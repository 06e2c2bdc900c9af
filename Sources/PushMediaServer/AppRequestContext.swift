import Hummingbird

/// The request context of every route: Hummingbird's basic context, under the name the Hummingbird 2
/// template gives it, so that a custom context later is a change of one line.
public typealias AppRequestContext = BasicRequestContext
