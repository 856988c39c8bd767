@testable import HTTPServer
import Locking
import Testing

/// A `DeferredAnswer` given while the final access-handler call still runs, or after the request
/// is over: the parts of the hand-over that need no connection (no suspension, so no
/// `MHD_resume_connection`). The suspended case runs over sockets in the integration target.
@Suite("Deferred answers (no sockets)")
struct DeferredAnswerTests {
    /// A request's context as `suspendAndRespond` hands it out, and its `DeferredAnswer`.
    private static func request() -> (RequestContext, DeferredAnswer) {
        let core = ServerCore(configuration: HTTPServerConfiguration(), responder: UnavailableResponder())
        // Never dereferenced: only a suspended request's connection is handed to libmicrohttpd.
        let unusedConnection = OpaquePointer(bitPattern: 0x1)!
        let context = RequestContext(connection: unusedConnection, startedNanoseconds: 0, machine: RequestStateMachine(limits: core.limits),
                                     head: HTTPRequestHead(method: .post, path: "/deferred"))
        context.core = core
        return (context, DeferredAnswer(context))
    }

    /// Says 503 its own way, so the test can tell its rejection from any other answer.
    private struct UnavailableResponder: HTTPResponder {
        func respond(to request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 500) }
        func rejection(_ rejection: HTTPRejection, head: HTTPRequestHead) -> HTTPResponse {
            HTTPResponse(status: rejection == .serviceUnavailable ? 503 : 400, headers: ["X-Path": head.path])
        }
    }

    enum Moment: String, CaseIterable, CustomStringConvertible {
        /// Given before the handler looked: it queues the answer in the same call.
        case duringTheCall
        /// The request ended first (the client went away, NOTIFY_COMPLETED): the answer is dropped.
        case afterTheRequestEnded
        var description: String { rawValue }
    }

    enum Giving: String, CaseIterable, CustomStringConvertible {
        /// `give(_:)` with the answer.
        case given
        /// `hold(_:)` first, then `giveHeld()`.
        case held
        /// `giveUnavailable()`: the responder's 503.
        case unavailable
        var description: String { rawValue }
    }

    @Test("an answer given during the final call is queued by that call; one after the request ended is dropped",
          arguments: Moment.allCases, Giving.allCases)
    func firstAnswerWins(moment: Moment, giving: Giving) {
        let (context, later) = Self.request()
        if moment == .afterTheRequestEnded { context.cancel() }
        let answer = HTTPResponse(status: 201, body: .bytes(Array("first".utf8)))
        let given: Bool
        switch giving {
        case .given:
            given = later.give(answer)
        case .held:
            later.hold(answer)
            given = later.giveHeld()
        case .unavailable:
            given = later.giveUnavailable()
        }
        let stream = HTTPStream()
        let again = later.give(HTTPResponse(status: 200, body: .stream(stream)))
        switch moment {
        case .duringTheCall:
            #expect(given)
            #expect(context.answeredInline, "the handler finds the answer in without suspending")
            #expect(!context.handOverToResolver(), "nobody is left to resume a suspension")
            let queued = context.takeAnswer()
            #expect(queued?.status == (giving == .unavailable ? 503 : 201))
            if giving == .unavailable { #expect(queued?.headers["X-Path"] == "/deferred") }
        case .afterTheRequestEnded:
            #expect(!given)
            #expect(!context.answeredInline)
            #expect(context.takeAnswer() == nil)
        }
        #expect(!again, "only the first answer counts")
        #expect(stream.isClosed, "a losing stream is closed, so its writer learns it")
        #expect(context.core == nil, "whoever ends the request lets go of the server: a kept DeferredAnswer keeps nothing alive")
    }

    @Test("answers given to a sink reach it, and the sink says whether it took them", arguments: [true, false])
    func sink(takes: Bool) {
        let received = LockedValue<[Int]>([])
        let later = DeferredAnswer { response in
            received.withLock { $0.append(response.status) }
            return takes
        }
        #expect(later.give(HTTPResponse(status: 204)) == takes)
        later.hold(HTTPResponse(status: 202))
        #expect(later.giveHeld() == takes)
        #expect(later.giveUnavailable() == takes)
        #expect(received.withLock { $0 } == [204, 202, 503])
    }
}
