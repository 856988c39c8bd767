import Foundation
import Testing

/// The routes of what apps do with sheets take `If-Match` and `Idempotency-Key` as every action
/// does, and a child created under a key is created once.
@Suite("New routes: preconditions and retries")
struct ChainPreconditionTests {
    @Test("If-Match and Idempotency-Key on each new route", arguments: [
        ("changes", #"{"hasChanges":true}"#, "changesMarked", #"{"hasChanges":false}"#),
        ("select", #"{"detent":"medium"}"#, "detentChanged", #"{"detent":"large"}"#),
        ("resize", #"{"containerHeight":390}"#, "resized", #"{"containerHeight":500}"#),
        ("navigate", #"{"push":"details"}"#, "pushed", #"{"push":"other"}"#),
    ])
    func preconditionsAndRetries(route: String, body: String, event: String, otherBody: String) async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let id = try SheetStoriesTests.create(client, SeedScenarioTests.seedConfiguration)
            let path = "/sessions/\(id)/\(route)"

            let stale = try client.request("POST", path, body: body, headers: [("If-Match", "\"7\"")])
            #expect(stale.status == 412 && stale.errorCode == "version_mismatch")
            #expect((stale.json["session"] as? [String: Any])?["version"] as? Int == 1)

            let key = [("Idempotency-Key", "\(route)-1"), ("If-Match", "\"1\"")]
            let first = try client.request("POST", path, body: body, headers: key)
            #expect(first.status == 200)
            #expect(SheetStoriesTests.types(first) == [event])
            #expect(first.header("ETag") == "\"2\"")
            let retry = try client.request("POST", path, body: body, headers: key)
            #expect(retry.header("Idempotent-Replayed") == "true")
            #expect(retry.body == first.body)
            let reused = try client.request("POST", path, body: otherBody, headers: [("Idempotency-Key", "\(route)-1")])
            #expect(reused.status == 422 && reused.errorCode == "idempotency_key_reused")
            #expect(try client.request("GET", "/sessions/\(id)").json["version"] as? Int == 2, "applied once")
            #expect(server.stop() == 0)
        }
    }

    @Test func aChildCreatedUnderAKeyIsCreatedOnce() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let parent = try SheetStoriesTests.create(client, "{}")
            let key = [("Idempotency-Key", "child-of-\(parent)")]
            let body = "{\"parent\":\"\(parent)\"}"
            let first = try client.request("POST", "/sessions", body: body, headers: key)
            #expect(first.status == 201)
            let retry = try client.request("POST", "/sessions", body: body, headers: key)
            #expect(retry.header("Idempotent-Replayed") == "true")
            #expect(retry.json["id"] as? String == first.json["id"] as? String)
            let events = try client.request("GET", "/sessions/\(parent)/events")
            #expect(SheetStoriesTests.types(events) == ["presented", "covered"])
            // A second child is refused, and the refusal is what the key remembers.
            let other = [("Idempotency-Key", "second-child")]
            let refused = try client.request("POST", "/sessions", body: body, headers: other)
            #expect(refused.status == 409 && refused.errorCode == "sheet_covered")
            #expect(try client.request("POST", "/sessions", body: body, headers: other).header("Idempotent-Replayed") == "true")
            // A parent that does not exist, or not an id at all, is a field at fault.
            for text in [#"{"parent":"AAAAAAAAAAAAAAAAAAAAAA"}"#, #"{"parent":"nope"}"#, #"{"parent":7}"#] {
                let bad = try client.request("POST", "/sessions", body: text)
                #expect(bad.status == 400 && bad.errorCode == "invalid_field" && bad.errorField == "parent", "\(text): \(bad.text)")
            }
            let listed = try client.request("GET", "/sessions").json["sessions"] as? [[String: Any]]
            #expect(listed?.count == 2, "refusals created nothing")
            #expect(server.stop() == 0)
        }
    }
}
