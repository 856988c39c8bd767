import Foundation
import Testing

/// The seed article's "Discard changes?" flow, driven over HTTP against the real binary.
@Suite("Seed scenario over HTTP")
struct SeedScenarioTests {
    static let seedConfiguration = #"{"detents":["large","medium"],"defaultDetent":"large","thresholdDetent":"height:300"}"#

    @Test func discardChangesFlow() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()

            let created = try client.request("POST", "/sessions", body: Self.seedConfiguration)
            #expect(created.status == 201)
            #expect(created.header("Content-Type") == "application/json; charset=utf-8")
            let id = try #require(created.json["id"] as? String)
            #expect(id.count == 22)
            #expect(created.header("Location") == "/sessions/\(id)")
            #expect(created.header("ETag") == "\"1\"")
            let config = try #require(created.json["config"] as? [String: Any])
            #expect(config["detents"] as? [String] == ["height:300", "medium", "large"])
            #expect(config["dismissPolicy"] as? String == "intercept")
            #expect(config["interceptAction"] as? String == "confirm")
            #expect(config["containerHeight"] as? Int == 844)
            #expect(created.json["phase"] as? String == "presented")
            #expect(created.json["detent"] as? String == "large")
            #expect(created.json["dismissReason"] is NSNull)

            // Drag to medium: the detent changes.
            let toMedium = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            #expect(toMedium.status == 200)
            let changed = try #require((toMedium.json["events"] as? [[String: Any]])?.first)
            #expect(changed["type"] as? String == "detentChanged")
            #expect(changed["from"] as? String == "large")
            #expect(changed["to"] as? String == "medium")
            #expect(changed["seq"] as? Int == 2)

            // Drag to the threshold: intercepted, the sheet snaps back to medium and asks.
            let toThreshold = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
            let intercepted = try #require((toThreshold.json["events"] as? [[String: Any]])?.first)
            #expect(intercepted["type"] as? String == "intercepted")
            #expect(intercepted["attempted"] as? String == "height:300")
            #expect(intercepted["restoredTo"] as? String == "medium")
            let session = try #require(toThreshold.json["session"] as? [String: Any])
            #expect(session["phase"] as? String == "confirming")
            #expect(session["detent"] as? String == "medium")

            // Cancel: back to presented at medium.
            let cancelled = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"cancel"}"#)
            #expect((cancelled.json["session"] as? [String: Any])?["phase"] as? String == "presented")
            #expect((cancelled.json["events"] as? [[String: Any]])?.first?["type"] as? String == "confirmationCancelled")
            #expect((cancelled.json["events"] as? [[String: Any]])?.first?["detent"] as? String == "medium")

            // Threshold again, then discard: dismissed for "discarded".
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
            let discarded = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"discard"}"#)
            let dismissed = try #require((discarded.json["events"] as? [[String: Any]])?.first)
            #expect(dismissed["type"] as? String == "dismissed")
            #expect(dismissed["reason"] as? String == "discarded")
            #expect((discarded.json["session"] as? [String: Any])?["dismissReason"] as? String == "discarded")

            // Present again: large, presentation 2.
            let presented = try client.request("POST", "/sessions/\(id)/present")
            let again = try #require(presented.json["session"] as? [String: Any])
            #expect(again["phase"] as? String == "presented")
            #expect(again["detent"] as? String == "large")
            #expect(again["presentation"] as? Int == 2)
            #expect(again["dismissReason"] is NSNull)
            #expect(presented.header("ETag") == "\"7\"")

            // The whole log, in order, as a presenter that starts late sees it.
            let log = try client.request("GET", "/sessions/\(id)/events")
            let types = (log.json["events"] as? [[String: Any]])?.compactMap { $0["type"] as? String }
            #expect(types == ["presented", "detentChanged", "intercepted", "confirmationCancelled", "intercepted", "dismissed", "presented"])
            #expect(log.json["version"] as? Int == 7)
            let seqs = (log.json["events"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int }
            #expect(seqs == Array(1...7))
            let later = try client.request("GET", "/sessions/\(id)/events?after=5")
            #expect((later.json["events"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int } == [6, 7])

            #expect(server.stop() == 0)
        }
    }

    @Test func curlStyleRequestsNeedNoContentType() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            // What `curl -d '{"to":"medium"}'` sends: a form content type on a JSON body.
            let created = try client.request("POST", "/sessions", body: #"{"detents":["medium","large"]}"#,
                                             headers: [("Content-Type", "application/x-www-form-urlencoded")])
            #expect(created.status == 201)
            let id = try #require(created.json["id"] as? String)
            let drag = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#,
                                          headers: [("Content-Type", "application/x-www-form-urlencoded")])
            #expect(drag.status == 200)
            #expect(server.stop() == 0)
        }
    }
}
