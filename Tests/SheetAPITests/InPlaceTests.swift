import Foundation
import HTTPServer
import Locking
import Polling
import SessionStore
import SheetAPI
import SheetJSON
import SheetObservability
import SQLiteArchive
import Testing

/// Which requests `SheetService.respondInPlace` answers on the calling thread (the HTTP layer's
/// final access-handler call), and that those answers are the ones `respond(to:)` gives.
@Suite("Answers in place")
struct InPlaceTests {
    private static func request(_ method: HTTPMethod, _ path: String, _ body: String = "", headers: HTTPHeaders = HTTPHeaders()) -> HTTPRequest {
        HTTPRequest(head: HTTPRequestHead(method: method, path: path, headers: headers), body: Array(body.utf8))
    }

    /// `respond` again until the shard it needs is idle (declined until then); `.declined` when
    /// it stays busy past `retried`'s bound, which only ends a failure.
    private static func takenOnceIdle(_ respond: () -> InPlaceAnswer) async -> InPlaceAnswer {
        await retried { () -> InPlaceAnswer? in
            let taken = respond()
            if case .declined = taken { return nil }
            return taken
        } ?? .declined
    }

    /// `respondInPlace(to:later:)` once the shard is idle, and its answer: given at once, or
    /// through `later` once what it waits for is done (waited for; the bound only ends a
    /// failure). nil when declined.
    private static func answerInPlace(_ service: SheetService, _ request: HTTPRequest, later: DeferredAnswer,
                                      given: LockedValue<[HTTPResponse]>) async -> HTTPResponse? {
        switch await takenOnceIdle({ service.respondInPlace(to: request, later: later) }) {
        case .answered(let now):
            return now   // nothing left to wait for: the writer committed before it was handed back
        case .declined:
            return nil
        case .deferred:
            let answers = await retried { () -> [HTTPResponse]? in
                let answers = given.withLock { $0 }
                return answers.isEmpty ? nil : answers
            } ?? []
            #expect(answers.count == 1)
            return answers.first
        }
    }

    /// A service over a SQLite archive in a fresh directory (the caller removes it), and a
    /// `DeferredAnswer` that collects what it is given.
    private static func durable() throws -> (SheetService, SessionStore, later: DeferredAnswer, given: LockedValue<[HTTPResponse]>, directory: String) {
        let directory = NSTemporaryDirectory() + "sheetd-inplace-" + UUID().uuidString
        let archive = try SQLiteArchive.open(directory: directory)
        let store = SessionStore(archive: archive, restoring: try archive.load())
        let service = SheetService(store: store, observer: ServiceObserver(level: .off, log: LogSink { _ in }))
        let given = LockedValue<[HTTPResponse]>([])
        let later = DeferredAnswer { response in
            given.withLock { $0.append(response) }
            return true
        }
        return (service, store, later, given, directory)
    }

    /// `respondInPlace(to:later:)` for a store that never makes an answer wait: the answer given
    /// right away, or nil when declined. Deferring is a failure here.
    private static func answeredNow(_ service: SheetService, _ request: HTTPRequest) -> HTTPResponse? {
        let later = DeferredAnswer { _ in
            Issue.record("an answer was given later by a store that has nothing to wait for")
            return false
        }
        switch service.respondInPlace(to: request, later: later) {
        case .answered(let response):
            return response
        case .declined:
            return nil
        case .deferred:
            Issue.record("\(request.head.method) \(request.head.path) was deferred by a store that has nothing to wait for")
            return nil
        }
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

        let drag = try #require(Self.answeredNow(service, Self.request(.post, "/sessions/\(id)/drag", #"{"to":"medium"}"#)))
        #expect(drag.status == 200)
        #expect(drag.headers["ETag"] == "\"2\"")
        guard case .object(let session)? = Self.member(Self.json(drag), "session") else {
            Issue.record("no session in the drag's answer")
            return
        }
        #expect(Self.member(session, "detent") == .string("medium"))

        // Refusals are answered in place too, as respond(to:) would.
        let stale = Self.request(.post, "/sessions/\(id)/drag", #"{"to":"large"}"#, headers: ["If-Match": "\"1\""])
        let refused = try #require(Self.answeredNow(service, stale))
        #expect(refused.status == 412)
        #expect(await service.respond(to: stale).status == 412)
        let missing = try #require(Self.answeredNow(service, Self.request(.post, "/sessions/AAAAAAAAAAAAAAAAAAAAAA/drag", #"{"to":"large"}"#)))
        #expect(missing.status == 404)
        #expect(try #require(Self.answeredNow(service, Self.request(.get, "/nowhere"))).status == 404)

        // A session's GET (and HEAD) in place, the same answer as respond(to:) gives.
        let get = Self.request(.get, "/sessions/\(id)")
        let read = try #require(Self.answeredNow(service, get))
        let readAsync = await service.respond(to: get)
        #expect(read.status == 200)
        #expect(read.headers["ETag"] == "\"2\"")
        #expect(Self.json(read).map(\.key) == Self.json(readAsync).map(\.key))
        #expect(Self.member(Self.json(read), "detent") == .string("medium"))
        #expect(try #require(Self.answeredNow(service, Self.request(.head, "/sessions/\(id)"))).status == 200)
        #expect(try #require(Self.answeredNow(service, Self.request(.get, "/sessions/AAAAAAAAAAAAAAAAAAAAAA"))).status == 404)

        // A create over nothing without an Idempotency-Key, the same answer as respond(to:) gives.
        let create = Self.request(.post, "/sessions", #"{"detents":["medium","large"]}"#)
        // Its shard may be the one the GET above has just left: taken once it is idle.
        let made = try #require(await retried { Self.answeredNow(service, create) })
        #expect(made.status == 201)
        #expect(made.headers["ETag"] == "\"1\"")
        guard case .string(let madeID)? = Self.member(Self.json(made), "id") else {
            Issue.record("no id in the create's answer")
            return
        }
        #expect(made.headers["Location"] == "/sessions/\(madeID)")
        #expect(Self.json(made).map(\.key) == Self.json(created).map(\.key))
        #expect(await service.respond(to: Self.request(.get, "/sessions/\(madeID)")).status == 200)

        // Not in place: other reads, deletes, creates over a parent, with an Idempotency-Key or
        // with a body to refuse, and actions with an Idempotency-Key (nothing made or applied).
        #expect(Self.answeredNow(service, Self.request(.get, "/sessions/\(id)/events")) == nil)
        #expect(Self.answeredNow(service, Self.request(.get, "/sessions")) == nil)
        #expect(Self.answeredNow(service, Self.request(.post, "/sessions", #"{"detents":"medium"}"#)) == nil)
        #expect(Self.answeredNow(service, Self.request(.post, "/sessions", #"{"detents":["large"],"parent":"\#(madeID)"}"#)) == nil)
        #expect(Self.answeredNow(service, Self.request(.post, "/sessions", #"{"detents":["large"]}"#, headers: ["Idempotency-Key": "k0"])) == nil)
        let listed = await service.respond(to: Self.request(.get, "/sessions"))
        guard case .array(let sessions)? = Self.member(Self.json(listed), "sessions") else {
            Issue.record("no sessions in the list")
            return
        }
        #expect(sessions.count == 2, "the declined creates made nothing")
        #expect(Self.answeredNow(service, Self.request(.delete, "/sessions/\(id)")) == nil)
        let keyed = Self.request(.post, "/sessions/\(id)/drag", #"{"to":"large"}"#, headers: ["Idempotency-Key": "k1"])
        #expect(Self.answeredNow(service, keyed) == nil)
        let after = await service.respond(to: Self.request(.get, "/sessions/\(id)"))
        #expect(Self.member(Self.json(after), "version") == .number(2), "the keyed drag was not applied")
        #expect(Self.member(Self.json(after), "detent") == .string("medium"))
    }

    @Test("with a durable store a drag is taken on in place and answered once committed, as respond(to:) answers it")
    func durableDragIsDeferred() async throws {
        let (service, store, later, given, directory) = try Self.durable()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let created = await service.respond(to: Self.request(.post, "/sessions", #"{"detents":["medium","large"]}"#))
        guard case .string(let id)? = Self.member(Self.json(created), "id") else {
            Issue.record("no id in \(created.status)")
            return
        }

        // The shard is idle once the create's last turn on it has ended (declined: nothing applied).
        guard let answer = await Self.answerInPlace(service, Self.request(.post, "/sessions/\(id)/drag", #"{"to":"medium"}"#),
                                                    later: later, given: given) else {
            Issue.record("a durable drag on an idle shard was not taken on in place")
            return
        }
        #expect(answer.status == 200)
        #expect(answer.headers["ETag"] == "\"2\"")
        guard case .object(let session)? = Self.member(Self.json(answer), "session") else {
            Issue.record("no session in the drag's answer")
            return
        }
        #expect(Self.member(session, "detent") == .string("medium"))
        // Its GET, with nothing outstanding once the drag was answered, is answered at once.
        let get = Self.request(.get, "/sessions/\(id)")
        let reading = await Self.takenOnceIdle { service.respondInPlace(to: get, later: later) }
        guard case .answered(let read) = reading else {
            Issue.record("a durable GET with nothing outstanding was not answered in place")
            return
        }
        #expect(read.status == 200)
        #expect(read.headers["ETag"] == "\"2\"")
        let again = await service.respond(to: Self.request(.post, "/sessions/\(id)/drag", #"{"to":"large"}"#))
        #expect(Self.json(again).map(\.key) == Self.json(answer).map(\.key), "the same answer as respond(to:) gives")

        // Refused with nothing outstanding: answered at once. With an Idempotency-Key: declined.
        let stale = Self.request(.post, "/sessions/\(id)/drag", #"{"to":"medium"}"#, headers: ["If-Match": "\"1\""])
        guard case .answered(let refused) = service.respondInPlace(to: stale, later: later) else {
            Issue.record("a refusal with nothing outstanding was not answered at once")
            return
        }
        #expect(refused.status == 412)
        let keyed = Self.request(.post, "/sessions/\(id)/drag", #"{"to":"medium"}"#, headers: ["Idempotency-Key": "k1"])
        guard case .declined = service.respondInPlace(to: keyed, later: later) else {
            Issue.record("a keyed drag was taken on in place")
            return
        }
        #expect(given.withLock { $0.count } <= 1)
        try await store.close()
    }

    @Test("with a durable store a create is made in place and answered once committed; one made after the store closed is answered 503 and not counted")
    func durableCreateIsDeferred() async throws {
        let (service, store, later, given, directory) = try Self.durable()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let create = Self.request(.post, "/sessions", #"{"detents":["medium","large"]}"#)
        guard let answer = await Self.answerInPlace(service, create, later: later, given: given) else {
            Issue.record("a durable create on an idle shard was not made in place")
            return
        }
        #expect(answer.status == 201)
        guard case .string(let id)? = Self.member(Self.json(answer), "id") else {
            Issue.record("no id in the create's answer")
            return
        }
        #expect(answer.headers["Location"] == "/sessions/\(id)")
        #expect(await service.respond(to: Self.request(.get, "/sessions/\(id)")).status == 200)
        guard case .bytes(let exposition) = await service.respond(to: Self.request(.get, "/metrics")).body else {
            Issue.record("no metrics")
            return
        }
        let metrics = String(decoding: exposition, as: UTF8.self)
        #expect(metrics.contains(#"sheetd_events_total{type="presented"} 1"#), "the create counted")
        try await store.close()

        // The archive refuses it at once, so it is never stored: never acknowledged, never counted.
        let lateGiven = LockedValue<[HTTPResponse]>([])
        let lateLater = DeferredAnswer { response in
            lateGiven.withLock { $0.append(response) }
            return true
        }
        let late = await Self.answerInPlace(service, create, later: lateLater, given: lateGiven)
        #expect(late?.status == 503)
        guard case .bytes(let after) = await service.respond(to: Self.request(.get, "/metrics")).body else {
            Issue.record("no metrics")
            return
        }
        #expect(String(decoding: after, as: UTF8.self).contains(#"sheetd_events_total{type="presented"} 1"#), "the refused create not counted")

        let again = try SQLiteArchive.open(directory: directory)
        defer { again.close() }
        #expect(try again.load().sessions.map(\.id.description) == [id])
    }
}
