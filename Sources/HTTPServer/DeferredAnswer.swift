/// The answer to one request, given later from any thread: what `HTTPResponder.respondInPlace(to:later:)`
/// holds when it took the request on in place but must wait for something that calls back (a
/// commit, say) before it may answer, with no task waiting meanwhile.
///
/// The connection is suspended until `give` (or the suspended-request deadline, or shutdown,
/// whichever comes first; the others' answers are dropped). Given before the access handler has
/// suspended the connection, the handler queues the answer itself, in the same call.
public struct DeferredAnswer: Sendable {
    private enum Destination: Sendable {
        case request(RequestContext, ServerCore)
        case sink(@Sendable (HTTPResponse) -> Bool)
    }

    private let destination: Destination

    init(context: RequestContext, core: ServerCore) {
        destination = .request(context, core)
    }

    /// An answer handed to `sink` (which says whether it took it), for code that drives a
    /// responder itself as the HTTP layer would: tests, the fuzzing harness.
    public init(_ sink: @escaping @Sendable (HTTPResponse) -> Bool) {
        destination = .sink(sink)
    }

    /// Gives the answer; false when the request was answered or ended already (the deadline,
    /// shutdown, the client went away), and then `response` is dropped. Never blocks.
    @discardableResult
    public func give(_ response: HTTPResponse) -> Bool {
        switch destination {
        case .request(let context, let core): context.resolve(response, core: core)
        case .sink(let sink): sink(response)
        }
    }
}

/// What `HTTPResponder.respondInPlace(to:later:)` did with a request.
public enum InPlaceAnswer: Sendable {
    /// The answer, given right away.
    case answered(HTTPResponse)
    /// Taken on: the responder gives the answer through the `DeferredAnswer` it was handed.
    case deferred
    /// Not taken on: `respond(to:)` answers it, in a task.
    case declined
}
