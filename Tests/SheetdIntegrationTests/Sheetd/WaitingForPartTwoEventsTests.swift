import Foundation
import Testing

/// The events of unsaved changes, rotation, navigation and sheets over sheets reach a presenter
/// that waits, over both ways of waiting: a parked long-poll and an event stream, each with the
/// same JSON as the events list.
@Suite("Waiting for the app's and the stack's events")
struct WaitingForPartTwoEventsTests {
    /// One server for the table: each case creates its own sessions.
    static let server = Result { try SheetdProcess() }

    /// A step on the watched session: `POST <path>` with a body, or a child created over it.
    enum Step: Sendable, CustomStringConvertible {
        case post(String, String)
        case createChild
        case dismissChild

        var description: String {
            switch self {
            case .post(let path, let body): "POST \(path) \(body)"
            case .createChild: "create a child"
            case .dismissChild: "dismiss the child"
            }
        }
    }

    struct Case: Sendable, CustomStringConvertible {
        let setup: [Step]
        let action: Step
        let events: [String]
        var description: String { "\(action) → \(events.joined(separator: ", "))" }
    }

    static let cases: [Case] = [
        Case(setup: [], action: .post("changes", #"{"hasChanges":true}"#), events: ["changesMarked"]),
        Case(setup: [], action: .post("resize", #"{"containerHeight":700}"#), events: ["resized"]),
        Case(setup: [], action: .post("select", #"{"detent":"medium"}"#), events: ["detentChanged"]),
        Case(setup: [], action: .post("navigate", #"{"push":"details"}"#), events: ["pushed"]),
        Case(setup: [.post("navigate", #"{"push":"details"}"#), .post("navigate", #"{"push":"photo"}"#)],
             action: .post("navigate", #"{"pop":2}"#), events: ["popped"]),
        Case(setup: [], action: .createChild, events: ["covered"]),
        Case(setup: [.createChild], action: .dismissChild, events: ["uncovered"]),
    ]

    @Test(arguments: cases)
    func eventReachesALongPollAndAStream(_ item: Case) async throws {
        try await offPool {
            let server = try Self.server.get()
            let client = try server.client()
            let id = try EventsTests.create(client)
            var child: String?
            func run(_ step: Step) throws {
                switch step {
                case .post(let path, let body):
                    let answer = try client.request("POST", "/sessions/\(id)/\(path)", body: body)
                    #expect(answer.status == 200, "\(step): \(answer.text)")
                case .createChild:
                    let created = try client.request("POST", "/sessions", body: #"{"parent":"\#(id)"}"#)
                    #expect(created.status == 201, "\(created.text)")
                    child = try #require(created.json["id"] as? String)
                case .dismissChild:
                    let child = try #require(child)
                    let answer = try client.request("POST", "/sessions/\(child)/dismiss", body: #"{"reason":"done"}"#)
                    #expect(answer.status == 200, "\(answer.text)")
                }
            }
            for step in item.setup { try run(step) }
            let version = try #require(try client.request("GET", "/sessions/\(id)").json["version"] as? Int)

            let stream = try EventsTests.openStream(server, id, query: "?after=\(version)")
            let waiter = try server.client()
            let suspended = try EventsTests.suspensions(server)
            try waiter.sendRaw(Array("GET /sessions/\(id)/events?after=\(version)&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            // Other cases share the server, so this may count their polls: the outcome below holds
            // either way, and the wait only makes it likely that the action releases a parked poll.
            _ = try EventsTests.waitForSuspensions(server, atLeast: suspended + 1)

            try run(item.action)

            let listed = try client.request("GET", "/sessions/\(id)/events?after=\(version)")
            let events = try #require(listed.json["events"] as? [[String: Any]])
            #expect(events.map { $0["type"] as? String } == item.events)
            let polled = try EventsTests.context("the long-poll's answer", of: server) { try waiter.readResponse() }
            #expect(polled.status == 200)
            let polledEvents = try #require(polled.json["events"] as? [[String: Any]])
            #expect(polledEvents.map(canonicalJSON) == events.map(canonicalJSON))
            let streamed = try EventsTests.context("the stream's messages", of: server) { try stream.next(item.events.count) }
            #expect(streamed.map(\.event) == item.events)
            #expect(streamed.map(\.id) == events.map { $0["seq"] as? Int ?? -1 })
            #expect(streamed.map { canonicalJSON($0.data) } == events.map(canonicalJSON))
        }
    }
}
