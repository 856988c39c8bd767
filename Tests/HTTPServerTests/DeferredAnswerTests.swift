@testable import HTTPServer
import Locking
import Testing

/// A `DeferredAnswer` given while the final access-handler call still runs, or after the request
/// is over: the parts of the hand-over that need no connection (no suspension, so no
/// `MHD_resume_connection`). The suspended case runs over sockets in the integration target.
@Suite("Deferred answers (no sockets)")
struct DeferredAnswerTests {
    private static func context() -> (RequestContext, ServerCore) {
        let core = ServerCore(configuration: HTTPServerConfiguration(), responder: NoResponder())
        // Never dereferenced: only a suspended request's connection is handed to libmicrohttpd.
        let unusedConnection = OpaquePointer(bitPattern: 0x1)!
        let context = RequestContext(connection: unusedConnection, startedNanoseconds: 0, limits: core.limits,
                                     head: HTTPRequestHead(method: .post, path: "/deferred"))
        return (context, core)
    }

    private struct NoResponder: HTTPResponder {
        func respond(to request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 500) }
    }

    enum Moment: String, CaseIterable, CustomStringConvertible {
        /// Given before the handler looked: it queues the answer in the same call.
        case duringTheCall
        /// The request ended first (the client went away, NOTIFY_COMPLETED): the answer is dropped.
        case afterTheRequestEnded
        var description: String { rawValue }
    }

    @Test("an answer given during the final call is queued by that call; one after the request ended is dropped",
          arguments: Moment.allCases)
    func firstAnswerWins(moment: Moment) {
        let (context, core) = Self.context()
        let later = DeferredAnswer(context: context, core: core)
        if moment == .afterTheRequestEnded { context.cancel() }
        let stream = HTTPStream()
        let given = later.give(HTTPResponse(status: 201, body: .bytes(Array("first".utf8))))
        let again = later.give(HTTPResponse(status: 200, body: .stream(stream)))
        switch moment {
        case .duringTheCall:
            #expect(given)
            #expect(context.answeredInline, "the handler finds the answer in without suspending")
            #expect(!context.handOverToResolver(), "nobody is left to resume a suspension")
            #expect(context.takeAnswer()?.status == 201)
        case .afterTheRequestEnded:
            #expect(!given)
            #expect(!context.answeredInline)
            #expect(context.takeAnswer() == nil)
        }
        #expect(!again, "only the first answer counts")
        #expect(stream.isClosed, "a losing stream is closed, so its writer learns it")
    }

    @Test("an answer given to a sink reaches it, and the sink says whether it took it", arguments: [true, false])
    func sink(takes: Bool) {
        let received = LockedValue<[Int]>([])
        let later = DeferredAnswer { response in
            received.withLock { $0.append(response.status) }
            return takes
        }
        #expect(later.give(HTTPResponse(status: 204)) == takes)
        #expect(received.withLock { $0 } == [204])
    }
}
