import Foundation
import Testing

/// Many clients at once, over loopback, against the real binary.
@Suite("Concurrent clients")
struct ConcurrencyTests {
    /// 8 clients × 200 requests alternate drags on one session while others create sessions; every
    /// answer is well formed, the version counts exactly the effective changes, and the event log
    /// has each change once, in order.
    @Test func eightClientsRaceOnOneSession() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let setup = try server.client()
            let created = try setup.request("POST", "/sessions", body: #"{"detents":["medium","large"]}"#)
            let id = try #require(created.json["id"] as? String)

            let clients = 8
            let perClient = 200
            struct Tally { var effective = 0; var malformed: [String] = []; var createdIDs = Set<String>() }
            // Locked (a pthread mutex), not Synchronization.Mutex: ThreadSanitizer cannot see
            // Mutex's contended path and reports every contended update here as a race.
            let tally = Locked(Tally())
            DispatchQueue.concurrentPerform(iterations: clients + 2) { worker in
                do {
                    let client = try server.client()
                    if worker >= clients {
                        // Two more clients create sessions in parallel with the drags.
                        for _ in 0..<perClient {
                            let answer = try client.request("POST", "/sessions")
                            tally.withLock { t in
                                if answer.status == 201, let new = answer.json["id"] as? String { t.createdIDs.insert(new) } else { t.malformed.append(answer.text) }
                            }
                        }
                        return
                    }
                    for index in 0..<perClient {
                        let target = (worker + index) % 2 == 0 ? "medium" : "large"
                        let answer = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"\#(target)"}"#)
                        let events = answer.json["events"] as? [[String: Any]]
                        let session = answer.json["session"] as? [String: Any]
                        let wellFormed = answer.status == 200 && events != nil && session?["detent"] as? String == target
                        tally.withLock { t in
                            if wellFormed { t.effective += events?.count ?? 0 } else { t.malformed.append(answer.text) }
                        }
                    }
                } catch {
                    tally.withLock { $0.malformed.append("\(error)") }
                }
            }
            let (effective, malformed, createdIDs) = tally.withLock { ($0.effective, $0.malformed, $0.createdIDs) }
            #expect(malformed.isEmpty, "\(malformed.prefix(3))")
            #expect(createdIDs.count == 2 * perClient)
            // A new connection: the setup one sat idle through the race, which on a slow machine
            // outlasts sheetd's idle timeout (30 s), and a closed keep-alive connection is no finding.
            let check = try server.client()
            let final = try check.request("GET", "/sessions/\(id)")
            let version = try #require(final.json["version"] as? Int)
            #expect(version == 1 + effective)
            // The newest 256 events are kept: they must be consecutive, alternating, and end at the version.
            let log = try check.request("GET", "/sessions/\(id)/events?after=\(max(0, version - 256))")
            let events = try #require(log.json["events"] as? [[String: Any]])
            let seqs = events.compactMap { $0["seq"] as? Int }
            #expect(seqs == Array((max(0, version - 256) + 1)...version))
            let changes = events.filter { $0["type"] as? String == "detentChanged" }
            for (previous, next) in zip(changes, changes.dropFirst()) {
                #expect(previous["to"] as? String == next["from"] as? String, "each change starts where the last one ended")
            }
            #expect(server.stop() == 0)
        }
    }
}
