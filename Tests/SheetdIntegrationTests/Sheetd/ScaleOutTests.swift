import Foundation
import Polling
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Several sheetd processes on one PostgreSQL (`--database`) serve any session through any of
/// them with the guarantees of one process: the real binary, a real private PostgreSQL, no mock.
@Suite("Scale-out: several instances on one PostgreSQL", .serialized)
struct ScaleOutTests {
    static let seed = #"{"detents":["large","medium"],"thresholdDetent":"height:300"}"#

    @Test func createThroughAActThroughBReadThroughC() async throws {
        try await offPool {
            let cluster = try SheetdCluster()
            let created = try cluster.client(0).request("POST", "/sessions", body: Self.seed)
            #expect(created.status == 201)
            let id = try #require(created.json["id"] as? String)

            let dragged = try cluster.client(1).request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            #expect(dragged.status == 200)
            #expect(dragged.header("ETag") == "\"2\"")
            // B's change is the state C reads, and what a change through A builds on.
            let read = try cluster.client(2).request("GET", "/sessions/\(id)")
            #expect(read.status == 200)
            #expect(read.header("ETag") == "\"2\"")
            #expect(read.json["detent"] as? String == "medium")
            let stale = try cluster.client(0).request("POST", "/sessions/\(id)/drag", body: #"{"to":"large"}"#, headers: [("If-Match", "\"1\"")])
            #expect(stale.status == 412)
            #expect(stale.errorCode == "version_mismatch")
            let intercepted = try cluster.client(0).request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#, headers: [("If-Match", "\"2\"")])
            #expect(intercepted.status == 200)
            #expect((intercepted.json["session"] as? [String: Any])?["phase"] as? String == "confirming")
            let conflict = try cluster.client(1).request("POST", "/sessions/\(id)/drag", body: #"{"to":"large"}"#)
            #expect(conflict.status == 409)
            #expect(conflict.errorCode == "confirmation_pending")
            #expect(try cluster.client(2).request("POST", "/sessions/\(id)/confirm", body: #"{"action":"discard"}"#).status == 200)

            // One log, whichever instance wrote each entry: medium, the interception, the dismissal.
            let log = try cluster.client(1).request("GET", "/sessions/\(id)/events")
            let events = (log.json["events"] as? [[String: Any]]) ?? []
            #expect(events.compactMap { $0["seq"] as? Int } == Array(1...4), "\(log.text)")
            #expect(events.first?["type"] as? String == "presented")
            #expect(events.last?["type"] as? String == "dismissed")

            // Listed through any instance; deleted through one, gone through the others.
            let listed = try cluster.client(2).request("GET", "/sessions")
            #expect((listed.json["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id])
            #expect(try cluster.client(0).request("DELETE", "/sessions/\(id)").status == 204)
            #expect(try cluster.client(1).request("GET", "/sessions/\(id)").status == 404)
            #expect(try cluster.client(2).request("POST", "/sessions/\(id)/present").status == 404)
        }
    }

    @Test func longPollOnBIsAnsweredByADragThroughA() async throws {
        try await offPool {
            let cluster = try SheetdCluster(instances: 2)
            let id = try cluster.createCountingSession(through: 0)
            for round in 1...5 {
                let waiter = try cluster.client(1, receiveTimeout: 40)
                try waiter.sendRaw(Array("GET /sessions/\(id)/events?after=\(round)&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                #expect(try cluster.client(1).request("GET", "/healthz").status == 200)
                let drag = try cluster.client(0).request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#)
                #expect(drag.status == 200)
                let answer = try waiter.readResponse()
                #expect(answer.status == 200)
                let events = try #require(answer.json["events"] as? [[String: Any]])
                #expect(events.map { $0["seq"] as? Int } == [round + 1], "round \(round): \(answer.text)")
                #expect(events.first?["type"] as? String == "dismissBlocked")
                #expect(answer.json["version"] as? Int == round + 1)
            }
        }
    }

    @Test func aStreamOnBFollowsChangesThroughA() async throws {
        try await offPool {
            let cluster = try SheetdCluster(instances: 2)
            let id = try cluster.createCountingSession(through: 0)
            let stream = try cluster.client(1, receiveTimeout: 40)
            try stream.sendRaw(Array("GET /sessions/\(id)/events?after=1 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".utf8))
            #expect(try stream.readResponseHead().status == 200)
            for _ in 0..<3 {
                #expect(try cluster.client(0).request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#).status == 200)
            }
            var text = ""
            while !(2...4).allSatisfy({ text.contains("id: \($0)\n") }) {
                guard let bytes = try stream.readAvailable() else { break }
                text += String(decoding: bytes, as: UTF8.self)
            }
            #expect((2...4).allSatisfy { text.contains("id: \($0)\n") }, "\(text)")
            #expect(text.components(separatedBy: "\"type\":\"dismissBlocked\"").count - 1 == 3, "\(text)")
        }
    }

    @Test func anIdempotencyKeyRetriedThroughAnotherInstanceReplaysTheFirstAnswer() async throws {
        try await offPool {
            let cluster = try SheetdCluster()
            let key = [("Idempotency-Key", "retry-\(UUID().uuidString)")]
            let first = try cluster.client(0).request("POST", "/sessions", body: #"{"dismissPolicy":"block"}"#, headers: key)
            #expect(first.status == 201)
            let again = try cluster.client(1).request("POST", "/sessions", body: #"{"dismissPolicy":"block"}"#, headers: key)
            #expect(again.status == 201)
            #expect(again.body == first.body)
            #expect(again.header("Idempotent-Replayed") == "true")
            let id = try #require(first.json["id"] as? String)
            #expect((try cluster.client(2).request("GET", "/sessions").json["sessions"] as? [[String: Any]])?.count == 1)

            let dragKey = [("Idempotency-Key", "drag-\(UUID().uuidString)")]
            let drag = try cluster.client(2).request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#, headers: dragKey)
            #expect(drag.status == 200)
            for index in [0, 1] {
                let replay = try cluster.client(index).request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#, headers: dragKey)
                #expect(replay.body == drag.body)
                #expect(replay.header("Idempotent-Replayed") == "true")
            }
            let reused = try cluster.client(1).request("POST", "/sessions/\(id)/drag", body: #"{"to":"large"}"#, headers: dragKey)
            #expect(reused.status == 422)
            #expect(reused.errorCode == "idempotency_key_reused")

            // The same key sent through all three at once: one drag applied, one answer for all.
            let raceKey = [("Idempotency-Key", "race-\(UUID().uuidString)")]
            let answers = LockedAnswers()
            let group = DispatchGroup()
            for port in cluster.instances.map(\.port) {
                group.enter()
                Thread {
                    answers.append(try? TestHTTPClient(port: port, receiveTimeout: 30)
                        .request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#, headers: raceKey))
                    group.leave()
                }.start()
            }
            #expect(group.wait(timeout: .now() + 60) == .success)
            let raced = answers.values
            #expect(raced.count == 3 && raced.allSatisfy { $0?.status == 200 && $0?.body == raced[0]?.body })
            #expect(try cluster.client(0).request("GET", "/sessions/\(id)").header("ETag") == "\"3\"")
        }
    }

    @Test func eightClientsDragSharedSessionsThroughEveryInstanceEachDragAppliedOnce() async throws {
        try await offPool {
            let cluster = try SheetdCluster()
            let sessions = try (0..<4).map { try cluster.createCountingSession(through: $0 % 3) }
            let load = DragLoad(sessions: sessions, ports: cluster.instances.map(\.port), clients: 8, drags: 200)
            #expect(load.wait())
            let results = load.results()
            #expect(results.anomalies.isEmpty, "\(results.anomalies.prefix(5))")
            #expect(results.statuses == [200: 1600])
            for session in sessions {
                let versions = (results.acknowledged[session] ?? []).sorted()
                // Every drag made exactly one version; none was lost, none given twice.
                #expect(versions == Array(2..<(2 + versions.count)), "session \(session)")
                let read = try cluster.client(1).request("GET", "/sessions/\(session)")
                #expect(read.header("ETag") == "\"\(1 + versions.count)\"")
            }
            #expect(results.total == 1600)
            for instance in cluster.instances { #expect(instance.stop() == 0) }
        }
    }

    @Test func killingOneInstanceUnderLoadLosesNothingItAcknowledged() async throws {
        try await offPool {
            let cluster = try SheetdCluster()
            let sessions = try (0..<16).map { try cluster.createCountingSession(through: $0 % 3) }
            let load = DragLoad(sessions: sessions, ports: cluster.instances.map(\.port), clients: 8, drags: 200)
            try Self.await({ load.results().total >= 300 }, "300 drags acknowledged before the kill")
            let victim = cluster.instances[2]
            load.remove(port: victim.port)
            victim.stop(signal: SIGKILL)
            #expect(!victim.process.isRunning)
            let atKill = load.results().total
            #expect(load.wait())
            let results = load.results()
            #expect(results.total > atKill, "the other instances carried on")
            // Only requests in flight on the killed instance may have gone unanswered.
            #expect(results.transportErrors.keys.allSatisfy { $0 == victim.port }, "\(results.transportErrors)")
            #expect(results.transportErrors[victim.port, default: 0] <= 8)
            #expect(results.statuses.keys.allSatisfy { $0 == 200 }, "\(results.statuses)")
            try Self.expectEveryAcknowledgedVersionIsThere(results, sessions, through: cluster.client(0))
            for instance in cluster.instances.prefix(2) { #expect(instance.stop() == 0) }
        }
    }

    @Test func postgresStoppedForFiveSecondsUnderLoadIs503sThenFullRecovery() async throws {
        try await offPool {
            let cluster = try SheetdCluster()
            let sessions = try (0..<16).map { try cluster.createCountingSession(through: $0 % 3) }
            let load = DragLoad(sessions: sessions, ports: cluster.instances.map(\.port), clients: 8, drags: 100_000)
            try Self.await({ load.results().total >= 200 }, "200 drags acknowledged before the outage")

            cluster.postgres.stop(immediate: true)
            let outage = Date()
            try Self.await({ load.results().unavailable.count >= 8 }, "503s while PostgreSQL is down")
            try cluster.awaitHealth(503)
            let health = try cluster.client(1).request("GET", "/healthz")
            #expect(health.status == 503)
            #expect(health.header("Retry-After") != nil)
            #expect(health.text.contains("unavailable"), "\(health.text)")
            let remaining = 5 - Date().timeIntervalSince(outage)
            if remaining > 0 { usleep(UInt32(remaining * 1_000_000)) }
            let duringOutage = load.results().total

            try cluster.postgres.start()
            try cluster.awaitHealth(200)
            try Self.await({ load.results().total >= duringOutage + 200 }, "drags acknowledged again after the outage")
            load.stop()
            #expect(load.wait())
            let results = load.results()
            #expect(cluster.instances.allSatisfy { $0.process.isRunning }, "no instance crashed")
            #expect(results.transportErrors.isEmpty, "\(results.transportErrors)")
            #expect(Set(results.statuses.keys).isSubset(of: [200, 503]), "\(results.statuses)")
            #expect(results.anomalies.isEmpty, "\(results.anomalies.prefix(5))")
            #expect(results.unavailable.allSatisfy { $0.code == "store_unavailable" && $0.retryAfter != nil })
            try Self.expectEveryAcknowledgedVersionIsThere(results, sessions, through: cluster.client(2))
            for instance in cluster.instances { #expect(instance.stop() == 0) }
        }
    }

    // MARK: Helpers

    /// Every acknowledged version of each session is in its event log as the drag's event, the
    /// log has no gap, and the session's version is its last entry.
    static func expectEveryAcknowledgedVersionIsThere(_ results: DragLoad.Results, _ sessions: [String], through client: TestHTTPClient) throws {
        for session in sessions {
            let log = try client.request("GET", "/sessions/\(session)/events?after=0")
            #expect(log.status == 200, "\(log.text)")
            let events = (log.json["events"] as? [[String: Any]]) ?? []
            let version = log.json["version"] as? Int ?? -1
            #expect(events.compactMap { $0["seq"] as? Int } == Array(1...max(1, version)), "session \(session) log has a gap")
            let blocked = Set(events.filter { $0["type"] as? String == "dismissBlocked" }.compactMap { $0["seq"] as? Int })
            let acknowledged = Set(results.acknowledged[session] ?? [])
            #expect(acknowledged.isSubset(of: blocked), "acknowledged but missing: \(acknowledged.subtracting(blocked).sorted())")
            #expect((results.acknowledged[session] ?? []).count == acknowledged.count, "a version acknowledged twice")
        }
    }

    /// Waits until `condition` holds; throws (the test fails) after `timeout` seconds.
    static func await(_ condition: () -> Bool, _ what: String, timeout: Double = 120) throws {
        guard eventuallyBlocking(within: .seconds(timeout), every: .milliseconds(10), condition) else {
            throw TestClientError(description: "not reached within \(timeout) s: \(what)")
        }
    }
}

/// Answers collected from several threads.
private final class LockedAnswers: @unchecked Sendable {
    // @unchecked Sendable: `list` is only touched with `lock` held.
    private let lock = NSLock()
    private var list: [TestResponse?] = []
    func append(_ answer: TestResponse?) { lock.lock(); list.append(answer); lock.unlock() }
    var values: [TestResponse?] { lock.lock(); defer { lock.unlock() }; return list }
}
