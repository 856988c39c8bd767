import HTTPServer
import SessionStore
import SheetAPI
import SheetJSON
import SheetObservability
import Testing

/// Which requests `SheetService.respondInPlace` answers on the calling thread (the HTTP layer's
/// final access-handler call), and that those answers are the ones `respond(to:)` gives.
@Suite("Answers in place")
struct InPlaceTests {
    private static func request(_ method: HTTPMethod, _ path: String, _ body: String = "", headers: HTTPHeaders = HTTPHeaders()) -> HTTPRequest {
        HTTPRequest(head: HTTPRequestHead(method: method, path: path, headers: headers), body: Array(body.utf8))
    }

    private static func json(_ response: HTTPResponse) -> [(key: String, value: JSONValue)] {
        guard case .bytes(let bytes) = response.body, case .object(let members)? = try? JSONParser.parse(bytes) else { return [] }
        return members
    }

    private static func member(_ members: [(key: String, value: JSONValue)], _ key: String) -> JSONValue? {
        members.first { $0.key == key }?.value
    }

    @Test("drags without Idempotency-Key and a session's GET are answered in place; the rest waits for respond(to:)")
    func whatIsAnsweredInPlace() async throws {
        let service = SheetService(store: SessionStore(), observer: ServiceObserver(level: .off, log: LogSink { _ in }))
        let created = await service.respond(to: Self.request(.post, "/sessions", #"{"detents":["medium","large"]}"#))
        guard case .string(let id)? = Self.member(Self.json(created), "id") else {
            Issue.record("no id in \(created.status)")
            return
        }

        let drag = try #require(service.respondInPlace(to: Self.request(.post, "/sessions/\(id)/drag", #"{"to":"medium"}"#)))
        #expect(drag.status == 200)
        #expect(drag.headers["ETag"] == "\"2\"")
        guard case .object(let session)? = Self.member(Self.json(drag), "session") else {
            Issue.record("no session in the drag's answer")
            return
        }
        #expect(Self.member(session, "detent") == .string("medium"))

        // Refusals are answered in place too, as respond(to:) would.
        let stale = Self.request(.post, "/sessions/\(id)/drag", #"{"to":"large"}"#, headers: ["If-Match": "\"1\""])
        let refused = try #require(service.respondInPlace(to: stale))
        #expect(refused.status == 412)
        #expect(await service.respond(to: stale).status == 412)
        let missing = try #require(service.respondInPlace(to: Self.request(.post, "/sessions/AAAAAAAAAAAAAAAAAAAAAA/drag", #"{"to":"large"}"#)))
        #expect(missing.status == 404)
        #expect(try #require(service.respondInPlace(to: Self.request(.get, "/nowhere"))).status == 404)

        // A session's GET (and HEAD) in place, the same answer as respond(to:) gives.
        let get = Self.request(.get, "/sessions/\(id)")
        let read = try #require(service.respondInPlace(to: get))
        let readAsync = await service.respond(to: get)
        #expect(read.status == 200)
        #expect(read.headers["ETag"] == "\"2\"")
        #expect(Self.json(read).map(\.key) == Self.json(readAsync).map(\.key))
        #expect(Self.member(Self.json(read), "detent") == .string("medium"))
        #expect(try #require(service.respondInPlace(to: Self.request(.head, "/sessions/\(id)"))).status == 200)
        #expect(try #require(service.respondInPlace(to: Self.request(.get, "/sessions/AAAAAAAAAAAAAAAAAAAAAA"))).status == 404)

        // Not in place: other reads, creates, deletes, and actions with an Idempotency-Key (nothing applied).
        #expect(service.respondInPlace(to: Self.request(.get, "/sessions/\(id)/events")) == nil)
        #expect(service.respondInPlace(to: Self.request(.get, "/sessions")) == nil)
        #expect(service.respondInPlace(to: Self.request(.post, "/sessions", "{}")) == nil)
        #expect(service.respondInPlace(to: Self.request(.delete, "/sessions/\(id)")) == nil)
        let keyed = Self.request(.post, "/sessions/\(id)/drag", #"{"to":"large"}"#, headers: ["Idempotency-Key": "k1"])
        #expect(service.respondInPlace(to: keyed) == nil)
        let after = await service.respond(to: Self.request(.get, "/sessions/\(id)"))
        #expect(Self.member(Self.json(after), "version") == .number(2), "the keyed drag was not applied")
        #expect(Self.member(Self.json(after), "detent") == .string("medium"))
    }
}
