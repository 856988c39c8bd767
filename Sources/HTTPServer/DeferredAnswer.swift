import Locking

/// The answer to one request, given later from any thread: what `HTTPResponder.respondInPlace(to:later:)`
/// holds when it took the request on in place but must wait for something that calls back (a
/// commit, say) before it may answer, with no task waiting meanwhile.
///
/// The connection is suspended until an answer is given (or the suspended-request deadline, or
/// shutdown, whichever comes first; the others' answers are dropped). Given before the access
/// handler has suspended the connection, the handler queues the answer itself, in the same call.
///
/// It is one reference: a closure that captures nothing else needs no allocation of its own, and
/// an answer made ahead (`hold`) waits in the request, not in the closure that gives it.
public struct DeferredAnswer: Sendable {
    let receiver: AnswerReceiver

    init(_ receiver: AnswerReceiver) {
        self.receiver = receiver
    }

    /// An answer handed to `sink` (which says whether it took it), for code that drives a
    /// responder itself as the HTTP layer would: tests, the fuzzing harness.
    public init(_ sink: @escaping @Sendable (HTTPResponse) -> Bool) {
        receiver = AnswerSink(sink)
    }

    /// Gives the answer; false when the request was answered or ended already (the deadline,
    /// shutdown, the client went away), and then `response` is dropped. Never blocks.
    @discardableResult
    public func give(_ response: HTTPResponse) -> Bool {
        receiver.give(response)
    }

    /// Keeps `response` as the answer `giveHeld` gives. Call it at most once, before anything
    /// that may give an answer can run (it is not synchronised with them).
    public func hold(_ response: HTTPResponse) {
        receiver.hold(response)
    }

    /// Gives the answer kept by `hold`, as `give` would.
    @discardableResult
    public func giveHeld() -> Bool {
        receiver.giveHeld()
    }

    /// Gives the server's 503 (the responder's `rejection(.serviceUnavailable, head:)`): for a
    /// request that can no longer be answered as planned because the server is going away.
    @discardableResult
    public func giveUnavailable() -> Bool {
        receiver.giveUnavailable()
    }
}

/// Where a `DeferredAnswer` goes: the request's own `RequestContext`, or an `AnswerSink`. A class
/// (not a protocol), so that `DeferredAnswer` is a single reference.
// @unchecked Sendable: it holds nothing; each subclass says how its own state is shared.
class AnswerReceiver: @unchecked Sendable {
    func give(_ response: HTTPResponse) -> Bool { preconditionFailure("AnswerReceiver is abstract") }
    func hold(_ response: HTTPResponse) { preconditionFailure("AnswerReceiver is abstract") }
    func giveHeld() -> Bool { preconditionFailure("AnswerReceiver is abstract") }
    func giveUnavailable() -> Bool { preconditionFailure("AnswerReceiver is abstract") }
}

/// Answers handed to a closure.
// @unchecked Sendable: `held` is touched only under its lock; `sink` is immutable and Sendable.
final class AnswerSink: AnswerReceiver, @unchecked Sendable {
    private let sink: @Sendable (HTTPResponse) -> Bool
    private let held = LockedValue<HTTPResponse?>(nil)

    init(_ sink: @escaping @Sendable (HTTPResponse) -> Bool) {
        self.sink = sink
    }

    override func give(_ response: HTTPResponse) -> Bool { sink(response) }

    override func hold(_ response: HTTPResponse) { held.withLock { $0 = response } }

    override func giveHeld() -> Bool {
        guard let response = held.withLock({ $0.take() }) else { preconditionFailure("giveHeld without hold") }
        return sink(response)
    }

    override func giveUnavailable() -> Bool { sink(.defaultRejection(.serviceUnavailable)) }
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
