import Foundation
import Testing

/// What real apps do with sheets, end to end against the real binary: an edit form protected
/// only while it has changes, a settings sheet with a navigation stack, a sheet over a sheet,
/// and a rotation that deactivates the threshold.
@Suite("Sheet stories")
struct SheetStoriesTests {
    /// The answer's events as `type` strings, and the session member of an action's answer.
    static func types(_ response: TestResponse) -> [String] {
        (response.json["events"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
    }

    static func session(_ response: TestResponse) -> [String: Any] {
        response.json["session"] as? [String: Any] ?? [:]
    }

    static func create(_ client: TestHTTPClient, _ body: String) throws -> String {
        let created = try client.request("POST", "/sessions", body: body)
        #expect(created.status == 201, "\(created.text)")
        return try #require(created.json["id"] as? String)
    }

    static func metrics(_ client: TestHTTPClient) throws -> [String: Double] {
        ObservabilityTests.samples(try client.request("GET", "/metrics").text)
    }

    @Test func anEditFormIsProtectedOnlyWhileItHasChanges() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let form = #"{"detents":["large","medium"],"dismissPolicy":"intercept","protectWhen":"hasChanges"}"#
            let id = try Self.create(client, form)

            // Clean: nothing to lose, the swipe goes through.
            let clean = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#)
            #expect(clean.status == 200)
            #expect(Self.session(clean)["phase"] as? String == "dismissed")
            #expect(Self.session(clean)["dismissReason"] as? String == "swipe")

            // Shown again, the user types: the same swipe is intercepted, and Save closes it.
            #expect(try client.request("POST", "/sessions/\(id)/present").status == 200)
            let marked = try client.request("POST", "/sessions/\(id)/changes", body: #"{"hasChanges":true}"#)
            #expect(Self.types(marked) == ["changesMarked"])
            #expect(Self.session(marked)["hasChanges"] as? Bool == true)
            let again = try client.request("POST", "/sessions/\(id)/changes", body: #"{"hasChanges":true}"#)
            #expect(again.status == 200 && Self.types(again).isEmpty, "the same value again changes nothing")
            let swiped = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#)
            #expect(Self.types(swiped) == ["intercepted"])
            #expect(Self.session(swiped)["phase"] as? String == "confirming")
            let saved = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"save"}"#)
            #expect(Self.session(saved)["dismissReason"] as? String == "saved")
            #expect(Self.session(saved)["hasChanges"] as? Bool == false)
            #expect(server.stop() == 0)
        }
    }

    @Test func aPopInASettingsSheetIsNeverADismissal() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let id = try Self.create(client, #"{"rootScreen":"settings"}"#)
            let before = try Self.metrics(client)
            for screen in ["account", "privacy"] {
                let pushed = try client.request("POST", "/sessions/\(id)/navigate", body: "{\"push\":\"\(screen)\"}")
                #expect(Self.types(pushed) == ["pushed"])
            }
            let popped = try client.request("POST", "/sessions/\(id)/navigate", body: #"{"pop":1}"#)
            let pop = try #require((popped.json["events"] as? [[String: Any]])?.first)
            #expect(pop["screens"] as? [String] == ["privacy"])
            #expect(pop["depth"] as? Int == 2)
            #expect(Self.session(popped)["phase"] as? String == "presented")
            #expect(Self.session(popped)["stack"] as? [String] == ["settings", "account"])

            let swiped = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#)
            let dismissed = try #require((swiped.json["events"] as? [[String: Any]])?.first)
            #expect(dismissed["type"] as? String == "dismissed")
            #expect(dismissed["reason"] as? String == "swipe")
            #expect(dismissed["screen"] as? String == "account")

            let log = try client.request("GET", "/sessions/\(id)/events")
            #expect(Self.types(log) == ["presented", "pushed", "pushed", "popped", "dismissed"])
            let after = try Self.metrics(client)
            func delta(_ key: String) -> Double { (after[key] ?? 0) - (before[key] ?? 0) }
            #expect(delta(#"sheetd_navigations_total{kind="push"}"#) == 2)
            #expect(delta(#"sheetd_navigations_total{kind="pop"}"#) == 1)
            #expect(delta(#"sheetd_events_total{type="dismissed"}"#) == 1)
            #expect(delta(#"sheetd_dismissals_total{reason="swipe"}"#) == 1)
            #expect(server.stop() == 0)
        }
    }

    @Test func aSheetOverASheetGoesFirstWhenItsParentIsDismissed() async throws {
        try await offPool {
            let directory = DurabilityTests.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let server = try SheetdProcess(["--data-dir", directory])
            let client = try server.client()
            let parent = try Self.create(client, #"{"detents":["large","medium"]}"#)
            let child = try Self.create(client, "{\"parent\":\"\(parent)\"}")
            let parentNow = try client.request("GET", "/sessions/\(parent)")
            #expect(parentNow.json["child"] as? String == child)
            #expect(try client.request("GET", "/sessions/\(child)").json["parent"] as? String == parent)
            let refused = try client.request("POST", "/sessions/\(parent)/drag", body: #"{"to":"medium"}"#)
            #expect(refused.status == 409 && refused.errorCode == "sheet_covered")
            // The app may still move it.
            #expect(Self.types(try client.request("POST", "/sessions/\(parent)/select", body: #"{"detent":"medium"}"#)) == ["detentChanged"])

            // Presenters of both sheets listen: a stream on each, and a long-poll on the child.
            let parentStream = try EventsTests.openStream(server, parent, query: "?after=3")
            let childStream = try EventsTests.openStream(server, child, query: "?after=1")
            let poller = try server.client()
            try poller.sendRaw(Array("GET /sessions/\(child)/events?after=1&wait=20 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            let before = try Self.metrics(client)

            let dismissed = try client.request("POST", "/sessions/\(parent)/dismiss", body: #"{"reason":"done"}"#)
            #expect(dismissed.status == 200)
            let own = try #require(dismissed.json["events"] as? [[String: Any]])
            #expect(own.compactMap { $0["type"] as? String } == ["uncovered", "dismissed"])
            #expect(own.first?["child"] as? String == child)
            #expect(own.first?["reason"] as? String == "parentDismissed")
            #expect(own.last?["reason"] as? String == "done")
            #expect(Self.session(dismissed)["child"] is NSNull)

            let childDismissed = try childStream.next(1)
            #expect(childDismissed.map(\.event) == ["dismissed"])
            #expect(childDismissed.first?.data["reason"] as? String == "parentDismissed")
            #expect(try parentStream.next(2).map(\.event) == ["uncovered", "dismissed"])
            let polled = try poller.readResponse()
            #expect(Self.types(polled) == ["dismissed"])
            // The child went first: its dismissal is no later than the parent's.
            let childAt = try #require(childDismissed.first?.data["at"] as? String)
            #expect(childAt <= (own.last?["at"] as? String ?? ""))
            let after = try Self.metrics(client)
            #expect((after[#"sheetd_dismissals_total{reason="parentDismissed"}"#] ?? 0)
                    - (before[#"sheetd_dismissals_total{reason="parentDismissed"}"#] ?? 0) == 1)

            // The chain after a restart: both dismissed, the child still naming its parent.
            #expect(server.stop() == 0)
            let second = try SheetdProcess(["--data-dir", directory])
            let reader = try second.client()
            let restoredChild = try reader.request("GET", "/sessions/\(child)")
            #expect(restoredChild.json["parent"] as? String == parent)
            #expect(restoredChild.json["dismissReason"] as? String == "parentDismissed")
            #expect(Self.types(try reader.request("GET", "/sessions/\(parent)/events")) ==
                    ["presented", "covered", "detentChanged", "uncovered", "dismissed"])
            // Deleting the parent takes the child too.
            #expect(try reader.request("DELETE", "/sessions/\(parent)").status == 204)
            #expect(try reader.request("GET", "/sessions/\(child)").status == 404)
            #expect(second.stop() == 0)
        }
    }

    @Test func aRotationDeactivatesTheThresholdAndTheWayBackRestoresIt() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let id = try Self.create(client, SeedScenarioTests.seedConfiguration)
            let narrow = try client.request("POST", "/sessions/\(id)/resize", body: #"{"containerHeight":390}"#)
            let resized = try #require((narrow.json["events"] as? [[String: Any]])?.first)
            #expect(resized["type"] as? String == "resized")
            #expect(resized["from"] as? Int == 844 && resized["to"] as? Int == 390)
            let session = Self.session(narrow)
            #expect(session["thresholdActive"] as? Bool == false)
            #expect(session["containerHeight"] as? Int == 390)
            #expect(session["detent"] as? String == "large", "the sheet keeps its detent by identity")
            let heights = try #require(session["heights"] as? [String: Any])
            #expect(heights["medium"] as? Double == 195 && heights["height:300"] as? Int == 300 && heights["large"] as? Int == 390)
            #expect((session["config"] as? [String: Any])?["containerHeight"] as? Int == 844)

            let refused = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
            #expect(refused.status == 409 && refused.errorCode == "threshold_inactive")
            #expect(try client.request("GET", "/sessions/\(id)").json["version"] as? Int == 2, "a refusal changes nothing")

            let wide = try client.request("POST", "/sessions/\(id)/resize", body: #"{"containerHeight":844}"#)
            #expect(Self.session(wide)["thresholdActive"] as? Bool == true)
            let same = try client.request("POST", "/sessions/\(id)/resize", body: #"{"containerHeight":844}"#)
            #expect(same.status == 200 && Self.types(same).isEmpty)
            let intercepted = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
            #expect(Self.types(intercepted) == ["intercepted"])
            #expect(server.stop() == 0)
        }
    }
}
