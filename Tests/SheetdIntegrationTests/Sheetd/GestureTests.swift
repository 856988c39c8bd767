import Foundation
import Testing

/// Gesture drags over HTTP: the gesture rule's worked numbers (container 844: large 844, medium 422,
/// threshold height:300) and the validation of T and V.
@Suite("Gesture drags over HTTP")
struct GestureTests {
    static let server = Result { try SheetdProcess() }

    struct Case: Sendable, CustomStringConvertible {
        let configuration: String
        let setup: String?       // a drag body applied first
        let body: String
        let target: String
        let phase: String
        let detent: String
        let eventTypes: [String]
        var description: String { "\(setup ?? "") \(body) → \(target)" }
    }

    static let seed = SeedScenarioTests.seedConfiguration
    static let cases: [Case] = [
        Case(configuration: seed, setup: nil, body: #"{"translation":400,"velocity":0}"#, target: "medium",
             phase: "presented", detent: "medium", eventTypes: ["detentChanged"]),
        Case(configuration: seed, setup: nil, body: #"{"translation":100,"velocity":1000}"#, target: "height:300",
             phase: "confirming", detent: "large", eventTypes: ["intercepted"]),
        Case(configuration: seed, setup: nil, body: #"{"translation":300,"velocity":3000}"#, target: "closed",
             phase: "confirming", detent: "large", eventTypes: ["intercepted"]),
        Case(configuration: seed, setup: nil, body: #"{"translation":-50,"velocity":-2000}"#, target: "large",
             phase: "presented", detent: "large", eventTypes: []),
        Case(configuration: #"{"detents":["medium","large"],"defaultDetent":"medium"}"#, setup: nil,
             body: #"{"translation":211}"#, target: "medium", phase: "presented", detent: "medium", eventTypes: []),
        Case(configuration: #"{"detents":["medium","large"]}"#, setup: nil, body: #"{"translation":700,"velocity":500}"#,
             target: "closed", phase: "dismissed", detent: "large", eventTypes: ["dismissed"]),
        Case(configuration: #"{"detents":["medium","large"],"dismissPolicy":"block"}"#, setup: nil,
             body: #"{"translation":700,"velocity":500}"#, target: "closed", phase: "presented", detent: "large", eventTypes: ["dismissBlocked"]),
    ]

    @Test(arguments: cases)
    func workedNumbers(_ item: Case) async throws {
        try await offPool {
            let client = try Self.server.get().client()
            let id = try #require(try client.request("POST", "/sessions", body: item.configuration).json["id"] as? String)
            let answer = try client.request("POST", "/sessions/\(id)/drag", body: item.body)
            #expect(answer.status == 200, "\(answer.text)")
            let gesture = try #require(answer.json["gesture"] as? [String: Any])
            #expect(gesture["target"] as? String == item.target)
            #expect(gesture["releasedHeight"] is NSNumber)
            #expect(gesture["projectedHeight"] is NSNumber)
            let session = try #require(answer.json["session"] as? [String: Any])
            #expect(session["phase"] as? String == item.phase)
            #expect(session["detent"] as? String == item.detent)
            let events = try #require(answer.json["events"] as? [[String: Any]])
            #expect(events.compactMap { $0["type"] as? String } == item.eventTypes)
            for event in events {
                #expect((event["gesture"] as? NSDictionary) == (gesture as NSDictionary), "every event carries the gesture")
            }
        }
    }

    @Test(arguments: [
        (#"{"translation":"400"}"#, "translation"),
        (#"{"translation":100000.01}"#, "translation"),
        (#"{"translation":-1e6}"#, "translation"),
        (#"{"translation":1,"velocity":100001}"#, "velocity"),
        (#"{"translation":1,"to":"large"}"#, "to"),
        (#"{"translation":1,"velocity":null}"#, "velocity"),
        (#"{"velocity":10}"#, "translation"),
        (#"{"translation":true}"#, "translation"),
    ])
    func invalidGesturesChangeNothing(body: String, field: String) async throws {
        try await offPool {
            let client = try Self.server.get().client()
            let id = try #require(try client.request("POST", "/sessions", body: Self.seed).json["id"] as? String)
            let answer = try client.request("POST", "/sessions/\(id)/drag", body: body)
            #expect(answer.status == 400)
            #expect(answer.errorCode == "invalid_field")
            #expect(answer.errorField == field)
            #expect(try client.request("GET", "/sessions/\(id)").json["version"] as? Int == 1)
        }
    }
}
