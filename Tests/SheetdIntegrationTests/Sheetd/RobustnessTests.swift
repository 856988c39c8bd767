import Foundation
import Polling
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 7 against the real binary: concurrent writers, retries, idle sessions, slow and hostile
/// peers, and a stop in the middle of load. Every test blocks on sockets, so each runs its body
/// off the cooperative pool.
@Suite("Robustness")
struct RobustnessTests {
    static let threeDetents = #"{"detents":["height:300","medium","large"],"defaultDetent":"large"}"#

    /// One server for the tests that only need sessions of their own.
    static let shared = Result { try SheetdProcess() }

    static func create(_ client: TestHTTPClient, _ body: String = threeDetents, headers: [(String, String)] = []) throws -> String {
        let created = try client.request("POST", "/sessions", body: body, headers: headers)
        #expect(created.status == 201, "create answered \(created.status) \(created.text)")
        return try #require(created.json["id"] as? String)
    }

    static func version(_ client: TestHTTPClient, _ id: String) throws -> Int? {
        try client.request("GET", "/sessions/\(id)").json["version"] as? Int
    }

    static func drag(_ id: String, to target: String, headers: [(String, String)]) -> [UInt8] {
        let body = #"{"to":"\#(target)"}"#
        var head = "POST /sessions/\(id)/drag HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        return Array((head + "\r\n" + body).utf8)
    }

    // MARK: - Optimistic concurrency

    /// Two clients send the same `If-Match` at the same moment, round after round: exactly one
    /// wins; the other gets 412 with the session as the winner left it, and changes nothing.
    @Test func ifMatchRaceHasExactlyOneWinner() async throws {
        try await offPool {
            let server = try Self.shared.get()
            let setup = try server.client()
            let id = try Self.create(setup)
            let detents = ["height:300", "medium", "large"]
            var current = (version: 1, detent: "large")
            for round in 0..<12 {
                let targets = detents.filter { $0 != current.detent }
                let requests = targets.map { Self.drag(id, to: $0, headers: [("If-Match", "\"\(current.version)\"")]) }
                let connections = try (0..<2).map { _ in try #require(WireConnection(port: server.port)) }
                let start = StartLine(2)
                let results = Locked<[Int: WireOutcome]>([:])
                // @unchecked: each thread uses only its own connection.
                struct Connections: @unchecked Sendable { let all: [WireConnection] }
                let shared = Connections(all: connections)
                onThreads(2) { index in
                    start.arriveAndWait()
                    let outcome = shared.all[index].exchange(requests[index])
                    results.withLock { $0[index] = outcome }
                }
                let answers = try results.withLock { r in try (0..<2).map { index -> WireAnswer in
                    guard case .answered(let answer) = r[index] else {
                        Issue.record("round \(round): no answer: \(String(describing: r[index]))")
                        throw TestClientError(description: "no answer")
                    }
                    return answer
                } }
                let winners = answers.indices.filter { answers[$0].status == 200 }
                let losers = answers.indices.filter { answers[$0].status == 412 }
                try #require(winners.count == 1 && losers.count == 1,
                             "round \(round): statuses \(answers.map(\.status)) \(answers.map { String(decoding: $0.body, as: UTF8.self) })")
                let won = answers[winners[0]]
                let lost = answers[losers[0]]
                let session = try #require(won.json["session"] as? [String: Any])
                let newVersion = try #require(session["version"] as? Int)
                #expect(newVersion == current.version + 1)
                #expect(session["detent"] as? String == targets[winners[0]])
                #expect(won.header("ETag") == "\"\(newVersion)\"")
                // The loser sees the session exactly as the winner left it.
                #expect(lost.errorCode == "version_mismatch")
                let seen = try #require(lost.json["session"] as? [String: Any])
                #expect(seen["version"] as? Int == newVersion)
                #expect(seen["detent"] as? String == targets[winners[0]])
                #expect(seen["updatedAt"] as? String == session["updatedAt"] as? String)
                #expect(lost.header("ETag") == "\"\(newVersion)\"")
                current = (newVersion, targets[winners[0]])
            }
            // Nothing the losers sent left a trace: one event per round.
            let final = try setup.request("GET", "/sessions/\(id)")
            #expect(final.json["version"] as? Int == 13)
            #expect(final.json["detent"] as? String == current.detent)
            let events = try setup.request("GET", "/sessions/\(id)/events?after=1").json["events"] as? [[String: Any]]
            #expect(events?.count == 12)
        }
    }

    @Test(arguments: [nil, "*", "  *  "] as [String?])
    func ifMatchStarOrAbsentAppliesUnconditionally(_ value: String?) async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let id = try Self.create(client)
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            let headers = value.map { [("If-Match", $0)] } ?? []
            let answer = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#, headers: headers)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.header("ETag") == "\"3\"")
            let deleted = try client.request("DELETE", "/sessions/\(id)", headers: headers)
            #expect(deleted.status == 204)
        }
    }

    /// Malformed preconditions are the client's mistake (400), never a silent "apply anyway".
    /// (Well-formed entity tags that name no version, such as "abc", are 412: see
    /// `ConditionalRequestTests`.)
    @Test(arguments: ["1", "0", "\"1", "1\"", "\"1 \"", "**", "\"1\"\"", "\u{E9}", "W/1", "\"1\" \"2\"", ",", "*, \"1\""])
    func malformedIfMatchIsRefused(_ value: String) async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let id = try Self.create(client)
            let drag = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: [("If-Match", value)])
            #expect(drag.status == 400, "\(drag.text)")
            #expect(drag.errorCode == "invalid_field")
            #expect(drag.errorField == "If-Match")
            let delete = try client.request("DELETE", "/sessions/\(id)", headers: [("If-Match", value)])
            #expect(delete.status == 400)
            let after = try client.request("GET", "/sessions/\(id)")
            #expect(after.json["version"] as? Int == 1)
            #expect(after.json["detent"] as? String == "large")
        }
    }

    @Test func staleIfMatchOnDeleteKeepsTheSession() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let id = try Self.create(client)
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)
            let stale = try client.request("DELETE", "/sessions/\(id)", headers: [("If-Match", "\"1\"")])
            #expect(stale.status == 412)
            #expect(stale.errorCode == "version_mismatch")
            #expect((stale.json["session"] as? [String: Any])?["version"] as? Int == 2)
            #expect(try client.request("GET", "/sessions/\(id)").status == 200)
            #expect(try client.request("DELETE", "/sessions/\(id)", headers: [("If-Match", "\"2\"")]).status == 204)
        }
    }

    // MARK: - Idempotent retries

    /// The parts of an answer a replay must repeat byte for byte.
    static func replayedParts(_ answer: TestResponse) -> [String] {
        [String(answer.status), answer.header("Content-Type") ?? "-", answer.header("ETag") ?? "-",
         answer.header("Location") ?? "-", String(decoding: answer.body, as: UTF8.self)]
    }

    @Test func retriedActionIsAppliedOnceAndReplayedByteForByte() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let id = try Self.create(client)
            let key = [("Idempotency-Key", "drag-\(id)")]
            let first = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: key)
            #expect(first.status == 200)
            #expect(first.header("Idempotent-Replayed") == nil)
            for _ in 0..<3 {
                let again = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: key)
                #expect(again.header("Idempotent-Replayed") == "true")
                #expect(again.body == first.body)
                #expect(Self.replayedParts(again) == Self.replayedParts(first))
            }
            #expect(try Self.version(client, id) == 2)
            let events = try client.request("GET", "/sessions/\(id)/events?after=1").json["events"] as? [[String: Any]]
            #expect(events?.count == 1)
        }
    }

    @Test func retriedCreateMakesOneSession() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let key = [("Idempotency-Key", "create-1")]
            let first = try client.request("POST", "/sessions", body: Self.threeDetents, headers: key)
            #expect(first.status == 201)
            #expect(first.header("Idempotent-Replayed") == nil)
            let again = try client.request("POST", "/sessions", body: Self.threeDetents, headers: key)
            #expect(again.status == 201)
            #expect(again.header("Idempotent-Replayed") == "true")
            #expect(Self.replayedParts(again) == Self.replayedParts(first))
            let listed = try client.request("GET", "/sessions").json["sessions"] as? [[String: Any]]
            #expect(listed?.count == 1)
            #expect(server.stop() == 0)
        }
    }

    /// Eight retries of one key in flight at once: one is applied, seven replay its answer.
    @Test(arguments: ["action", "create"])
    func concurrentRetriesOfOneKey(_ route: String) async throws {
        try await offPool {
            let server = try SheetdProcess()
            let setup = try server.client()
            let id = try Self.create(setup)
            let request: [UInt8]
            if route == "action" {
                request = Self.drag(id, to: "medium", headers: [("Idempotency-Key", "same-key")])
            } else {
                let body = Self.threeDetents
                request = Array("POST /sessions HTTP/1.1\r\nHost: x\r\nIdempotency-Key: same-key\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
            }
            let clients = 8
            let connections = try (0..<clients).map { _ in try #require(WireConnection(port: server.port)) }
            struct Connections: @unchecked Sendable { let all: [WireConnection] }
            let shared = Connections(all: connections)
            let start = StartLine(clients)
            let outcomes = Locked<[WireOutcome]>([])
            onThreads(clients) { index in
                start.arriveAndWait()
                let outcome = shared.all[index].exchange(request)
                outcomes.withLock { $0.append(outcome) }
            }
            let answers = outcomes.withLock { $0 }.compactMap { outcome -> WireAnswer? in
                if case .answered(let answer) = outcome { return answer }
                return nil
            }
            try #require(answers.count == clients)
            #expect(Set(answers.map(\.status)) == [route == "action" ? 200 : 201])
            #expect(Set(answers.map(\.body)).count == 1, "every retry got the first answer's body")
            #expect(answers.filter { $0.header("Idempotent-Replayed") == nil }.count == 1)
            #expect(answers.filter { $0.header("Idempotent-Replayed") == "true" }.count == clients - 1)
            if route == "action" {
                #expect(try Self.version(setup, id) == 2)
            } else {
                let listed = try setup.request("GET", "/sessions").json["sessions"] as? [[String: Any]]
                #expect(listed?.count == 2, "the setup session and exactly one created by the key")
            }
            #expect(server.stop() == 0)
        }
    }

    @Test func sameKeyForAnotherRequestIsRefused() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let id = try Self.create(client)
            let key = [("Idempotency-Key", "reuse-\(id)")]
            #expect(try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: key).status == 200)
            // Other body, other path on the same session: 422, nothing applied.
            let otherBody = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#, headers: key)
            #expect(otherBody.status == 422)
            #expect(otherBody.errorCode == "idempotency_key_reused")
            let otherPath = try client.request("POST", "/sessions/\(id)/dismiss", body: #"{"reason":"done"}"#, headers: key)
            #expect(otherPath.status == 422)
            #expect(otherPath.errorCode == "idempotency_key_reused")
            let after = try client.request("GET", "/sessions/\(id)")
            #expect(after.json["version"] as? Int == 2)
            #expect(after.json["detent"] as? String == "medium")
            // Keys of actions are scoped to their session: the same key elsewhere is a new request.
            let other = try Self.create(client)
            #expect(try client.request("POST", "/sessions/\(other)/drag", body: #"{"to":"medium"}"#, headers: key).header("Idempotent-Replayed") == nil)
            #expect(try Self.version(client, other) == 2)
            // Creation keys are global: another configuration under a used key is refused.
            let createKey = [("Idempotency-Key", "create-reuse-\(id)")]
            #expect(try client.request("POST", "/sessions", body: Self.threeDetents, headers: createKey).status == 201)
            let reused = try client.request("POST", "/sessions", body: #"{"detents":["medium"]}"#, headers: createKey)
            #expect(reused.status == 422)
            #expect(reused.errorCode == "idempotency_key_reused")
        }
    }

    static let malformedKeys: [(name: String, value: String)] = [
        ("empty", ""),
        ("129 characters", String(repeating: "k", count: 129)),
        ("non-ASCII", "cl\u{E9}-1"),
        ("inner space", "my key"),
        ("control character", "key\u{1}1"),
    ]

    @Test(arguments: malformedKeys.map(\.name))
    func malformedIdempotencyKeyIsRefused(_ name: String) async throws {
        let value = try #require(Self.malformedKeys.first { $0.name == name }).value
        // A control character makes the field itself invalid: the HTTP layer refuses it before
        // the API reads the key, and closes the connection.
        let code = name == "control character" ? "invalid_header" : "invalid_idempotency_key"
        try await offPool {
            let id = try Self.create(try Self.shared.get().client())
            let drag = try Self.shared.get().client()
                .request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: [("Idempotency-Key", value)])
            #expect(drag.status == 400, "\(drag.text)")
            #expect(drag.errorCode == code)
            #expect(try Self.version(try Self.shared.get().client(), id) == 1)
            let create = try Self.shared.get().client()
                .request("POST", "/sessions", body: Self.threeDetents, headers: [("Idempotency-Key", value)])
            #expect(create.status == 400)
            #expect(create.errorCode == code)
        }
    }

    @Test func longestKeyIsAccepted() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let id = try Self.create(client)
            let key = [("Idempotency-Key", String(repeating: "~", count: 120) + String(id.prefix(8)))]
            let first = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: key)
            #expect(first.status == 200)
            let again = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#, headers: key)
            #expect(again.header("Idempotent-Replayed") == "true")
        }
    }

    /// An answer below 500 is the answer: a 409 replays as the same 409, even after the session
    /// has moved on.
    @Test func replayedConflictStaysAConflict() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let id = try Self.create(client, #"{"detents":["medium","large"],"dismissPolicy":"intercept"}"#)
            let key = [("Idempotency-Key", "confirm-\(id)")]
            let first = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"save"}"#, headers: key)
            #expect(first.status == 409)
            #expect(first.errorCode == "no_pending_confirmation")
            // Now a confirmation is pending: a fresh request would succeed, the retry must not.
            let intercepted = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"closed"}"#)
            #expect((intercepted.json["session"] as? [String: Any])?["phase"] as? String == "confirming")
            let again = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"save"}"#, headers: key)
            #expect(again.status == 409)
            #expect(again.header("Idempotent-Replayed") == "true")
            #expect(again.body == first.body)
            let after = try client.request("GET", "/sessions/\(id)")
            #expect(after.json["phase"] as? String == "confirming")
        }
    }

    /// A 5xx is not stored: once capacity frees up, the same key creates the session.
    @Test func serverErrorIsNotStored() async throws {
        try await offPool {
            let server = try SheetdProcess(["--max-sessions", "1"])
            let client = try server.client()
            let blocker = try Self.create(client)
            let key = [("Idempotency-Key", "after-capacity")]
            let refused = try client.request("POST", "/sessions", body: Self.threeDetents, headers: key)
            #expect(refused.status == 503)
            #expect(refused.errorCode == "capacity_exceeded")
            #expect(try client.request("DELETE", "/sessions/\(blocker)").status == 204)
            let created = try client.request("POST", "/sessions", body: Self.threeDetents, headers: key)
            #expect(created.status == 201)
            #expect(created.header("Idempotent-Replayed") == nil)
            let replayed = try client.request("POST", "/sessions", body: Self.threeDetents, headers: key)
            #expect(replayed.status == 201)
            #expect(replayed.header("Idempotent-Replayed") == "true")
            #expect(replayed.body == created.body)
            #expect(server.stop() == 0)
        }
    }

    // MARK: - Session lifetime

    /// `--session-ttl 2s`: sessions nobody names are removed by the sweep, and their places
    /// are free again. Outcomes only: which uses keep a session and when exactly it goes are
    /// checked on a manual clock (SessionStoreTests' `ClockedStoreTests`); here, that sheetd
    /// runs the sweep at all. Watched through /metrics, since naming a session would keep it.
    @Test func idleSessionsExpireAndFreeTheirPlaces() async throws {
        try await offPool {
            let server = try SheetdProcess(["--session-ttl", "2s", "--max-sessions", "3"])
            let client = try server.client()
            for _ in 0..<3 { _ = try Self.create(client) }
            func sessionsHeld() throws -> Int {
                let metrics = try client.request("GET", "/metrics").text
                return metrics.split(separator: "\n").filter { $0.hasPrefix("sheetd_sessions{") }
                    .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0) { $0 + Int($1) }
            }
            // 60 s only end a failure.
            #expect(try eventuallyBlocking(within: .seconds(60), every: .milliseconds(50)) { try sessionsHeld() == 0 },
                    "the idle sessions were not removed")
            // The expired places are free again (that no more are freed than expired is checked
            // in-process, where a stall of the machine cannot expire a new session meanwhile).
            for _ in 0..<3 { #expect(try client.request("POST", "/sessions").status == 201) }
            #expect(server.stop() == 0)
        }
    }

    // MARK: - Slow and hostile peers

    /// How many of `count` requests of a normal client on one keep-alive connection were answered
    /// 200 (the first other answer throws). Their times are not kept: on a busy machine they say
    /// nothing about the server.
    static func normalRequestsAnswered(_ client: TestHTTPClient, session id: String, count: Int) throws -> Int {
        var answered = 0
        for index in 0..<count {
            let answer = index % 2 == 0
                ? try client.request("GET", "/sessions/\(id)")
                : try client.request("POST", "/sessions/\(id)/drag", body: index % 4 == 1 ? #"{"to":"medium"}"# : #"{"to":"large"}"#)
            guard answer.status == 200 else { throw TestClientError(description: "normal request answered \(answer.status) \(answer.text)") }
            answered += 1
            usleep(5_000)
        }
        return answered
    }

    /// 200 slowloris peers (100 trickling a head, 100 a body, a byte every 400 ms: an inactivity
    /// timer alone would never fire) are held open while a normal client is served, and each
    /// peer is cut (`--idle-timeout 30s`; when exactly is checked on a manual clock in
    /// ClockedRulesTests, not here, where it would depend on the machine's load). The timeout
    /// only has to outlast opening the peers and the normal client's 40 requests, which took up
    /// to 3.2 s in the whole suite under two busy loops: with 2 s, every peer was once cut
    /// before the client was done.
    @Test func slowlorisPeersAreCutWhileOthersAreServed() async throws {
        try await offPool {
            let server = try SheetdProcess(["--idle-timeout", "30s", "--log-level", "warn"])
            let setup = try server.client()
            let id = try Self.create(setup)

            struct Peer { let fd: Int32; let opened: ContinuousClock.Instant; var rest: [UInt8]; var closedAfter: Double? }
            var peers: [Peer] = []
            for index in 0..<200 {
                let fd = socket(AF_INET, testSocketType, 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = in_port_t(UInt16(server.port).bigEndian)
                inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                try #require(connected == 0, "slow peer \(index) could not connect: errno \(errno)")
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                let text = index % 2 == 0
                    ? "GET /sessions/\(id) HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + String(repeating: "s", count: 200) + "\r\n\r\n"
                    : "POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200\r\n\r\n" + String(repeating: " ", count: 200)
                var bytes = Array(text.utf8)
                if index % 2 == 1 {
                    // The head goes at once; only the body trickles.
                    let headLength = text.utf8.count - 200
                    _ = bytes.prefix(headLength).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    bytes.removeFirst(headLength)
                }
                peers.append(Peer(fd: fd, opened: .now, rest: bytes, closedAfter: nil))
            }
            defer { for peer in peers { close(peer.fd) } }

            // The slow peers trickle on a thread of their own while the normal client runs.
            let shared = Locked(peers)
            let trickling = Atomic<Bool>(true)
            let done = DispatchSemaphore(value: 0)
            let trickler = Thread {
                shared.withLock { peers in
                    var lastSend = ContinuousClock.now - .seconds(1)
                    let begun = ContinuousClock.now
                    var scratch = [UInt8](repeating: 0, count: 4096)
                    // 120 s only end a failure: the cut comes about 30 s in.
                    while peers.contains(where: { $0.closedAfter == nil }) && milliseconds(since: begun) < 120_000 {
                        let sendNow = milliseconds(since: lastSend) >= 400
                        if sendNow { lastSend = .now }
                        for index in peers.indices where peers[index].closedAfter == nil {
                            let fd = peers[index].fd
                            let received = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                            var gone = received == 0 || (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                            if !gone && sendNow && !peers[index].rest.isEmpty {
                                let byte = peers[index].rest.removeFirst()
                                gone = withUnsafeBytes(of: byte) { send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) } < 0 && errno != EAGAIN
                            }
                            if gone { peers[index].closedAfter = milliseconds(since: peers[index].opened) }
                        }
                        usleep(50_000)
                    }
                }
                trickling.store(false, ordering: .releasing)
                done.signal()
            }
            trickler.start()

            let answered = try Self.normalRequestsAnswered(setup, session: id, count: 40)
            // A connection opened while the peers hold theirs is served too.
            let fresh = try server.client()
            #expect(try fresh.request("GET", "/healthz").status == 200)
            let stillTrickling = trickling.load(ordering: .acquiring)
            let servedAfter = Int(milliseconds(since: peers[0].opened))
            done.wait()
            let cutTimes = shared.withLock { $0.map(\.closedAfter) }

            #expect(stillTrickling, "the normal client ran while the slow peers were still open (served \(servedAfter) ms after the first peer connected)")
            #expect(answered == 40, "every request of the normal client was answered")
            let open = cutTimes.filter { $0 == nil }.count
            #expect(open == 0, "\(open) slow peers were never cut")
            // And the server is fine afterwards.
            #expect(try server.client().request("GET", "/sessions/\(id)").status == 200)
            #expect(server.stop() == 0)
        }
    }

    /// The per-client cap below counts on a closed client reaching the server as a FIN, which
    /// takes its socket staying out of the sheetd servers other tests spawn meanwhile.
    @Test func testClientSocketsAreCloseOnExec() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let wire = try #require(WireConnection(port: try Self.shared.get().port))
            for (name, fd) in [("client", client.fd), ("wire", wire.fd)] {
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) ?? "?"
                #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0, "\(name) fd \(fd) → \(target), flags \(fcntl(fd, F_GETFD))")
            }
        }
    }

    /// The extra connection from one address is closed without an answer; once a connection
    /// closes, that address may connect again.
    @Test func connectionsPerClientAreCapped() async throws {
        try await offPool {
            let server = try SheetdProcess(["--max-connections-per-client", "3"])
            var clients = try (0..<3).map { _ in try server.client() }
            for client in clients { #expect(try client.request("GET", "/healthz").status == 200) }
            let extra = try #require(WireConnection(port: server.port, receiveTimeout: 3))
            let outcome = extra.exchange(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            guard case .closedBeforeAnswer = outcome else {
                Issue.record("the fourth connection got \(outcome)")
                return
            }
            clients.removeLast()
            // 30 s only end a failure.
            let served = eventuallyBlocking(within: .seconds(30), every: .milliseconds(20)) {
                (try? server.client().request("GET", "/healthz").status) == 200
            }
            #expect(served, "a connection is accepted again once one closed")
            for client in clients { #expect(try client.request("GET", "/healthz").status == 200) }
            #expect(server.stop() == 0)
        }
    }

    /// At `--max-connections` sheetd stops accepting: a further connection waits in the
    /// listen backlog, unanswered, and is served as soon as an open one closes.
    @Test func connectionsBeyondTheLimitWaitForAFreeSlot() async throws {
        try await offPool {
            let server = try SheetdProcess(["--max-connections", "3", "--threads", "1"])
            var clients = try (0..<3).map { _ in try server.client() }
            for client in clients { #expect(try client.request("GET", "/healthz").status == 200) }
            let waiting = try #require(WireConnection(port: server.port, receiveTimeout: 0.8))
            let early = waiting.exchange(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            guard case .timedOut = early else {
                Issue.record("a connection beyond the limit got \(early) instead of waiting")
                return
            }
            clients.removeFirst()
            guard case .answered(let answer) = waiting.readAnswer(waitingUpTo: 5) else {
                Issue.record("the waiting connection was not served once a slot freed")
                return
            }
            #expect(answer.status == 200)
            #expect(server.stop() == 0)
        }
    }

    /// A worker thread that finds exactly 128 requests ready at once (libmicrohttpd's batch of
    /// epoll events) answers them at once, not after its connection timeout: the process is
    /// stopped while 128 keep-alive connections send a request each, so the worker wakes to all
    /// of them together. The clients' 20 s only end a failure (the stall lasted the 30 s timeout,
    /// then closed the connections unanswered).
    @Test(arguments: [128, 256])
    func aFullBatchOfReadyRequestsIsAnsweredAtOnce(connections: Int) async throws {
        try await offPool {
            let server = try SheetdProcess(["--threads", "1"])
            let pid = server.process.processIdentifier
            let clients = try (0..<connections).map { _ in try TestHTTPClient(port: server.port, receiveTimeout: 20) }
            for client in clients { #expect(try client.request("GET", "/healthz").status == 200) }
            try #require(kill(pid, SIGSTOP) == 0)
            for client in clients { try client.sendRaw(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)) }
            try #require(kill(pid, SIGCONT) == 0)
            var answered = 0
            for client in clients where (try? client.readResponse().status) == 200 { answered += 1 }
            #expect(answered == connections)
            #expect(server.stop() == 0)
        }
    }

    /// Out of descriptors, sheetd cannot accept: it says so once, keeps serving the connections
    /// it has, leaves new ones in the backlog, and takes them as soon as descriptors are free.
    @Test func outOfDescriptorsNewConnectionsWaitAndOpenOnesAreServed() async throws {
        try await offPool {
            let server = try SheetdProcess(["--threads", "1"])
            let pid = server.process.processIdentifier
            let open = try server.client()
            #expect(try open.request("GET", "/healthz").status == 200)
            // The soft limit at the lowest free descriptor number: the next accept gets EMFILE.
            let soft = try #require(try server.softOpenFileLimit())
            let used = Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").compactMap { Int($0) })
            let lowestFree = (0...).first { !used.contains($0) }!
            func setSoftLimit(_ value: String) throws {
                let prlimit = try ChildProcess("/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=\(value):"], environment: [:])
                #expect(prlimit.waitForExit(within: 20) == 0, "prlimit --nofile=\(value):")
            }
            try setSoftLimit(String(lowestFree))
            let waiting = try #require(WireConnection(port: server.port, receiveTimeout: 0.8))
            let early = waiting.exchange(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            guard case .timedOut = early else {
                Issue.record("a connection sheetd had no descriptor for got \(early) instead of waiting")
                return
            }
            let said = server.process.waitForStandardError(within: 20) { $0.contains("cannot accept a connection: Too many open files") }
            #expect(said.contains("cannot accept a connection: Too many open files"))
            #expect(try open.request("GET", "/healthz").status == 200, "the open connection is still served")
            try setSoftLimit(soft)
            guard case .answered(let answer) = waiting.readAnswer(waitingUpTo: 10) else {
                Issue.record("the waiting connection was not served once descriptors were free")
                return
            }
            #expect(answer.status == 200)
            #expect(server.stop() == 0)
            let lines = server.stderr.components(separatedBy: "cannot accept a connection").count - 1
            #expect(lines == 1, "said \(lines) times")
        }
    }

    /// Whatever the open-file limit, sheetd either refuses to start, saying why, or serves and
    /// stops cleanly. libdispatch makes its event loop's descriptors at the first timer and
    /// aborts the process when it cannot: that timer used to come just after "listening on",
    /// and limits a few descriptors above what start-up takes killed sheetd (SIGILL) there.
    @Test func everyOpenFileLimitEndsInAClearRefusalOrAServer() async throws {
        try await offPool {
            var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SHEETD_") }
            env["SWIFT_BACKTRACE"] = "enable=no"
            var refused = 0
            var served = 0
            for limit in 8...28 {
                let child = try ChildProcess("/usr/bin/prlimit", [
                    "--nofile=\(limit):", "--", SheetdProcess.binary.path,
                    "--memory", "--port", "0", "--threads", "1",
                ], environment: env, standardError: .collect)
                // A refusal closes standard error at once.
                if let port = SheetdProcess.listeningPort(of: child).port {
                    let answer = try TestHTTPClient(port: port).request("GET", "/healthz")
                    #expect(answer.status == 200, "ulimit -n \(limit)")
                    #expect(child.stop() == 0, "ulimit -n \(limit): \(child.standardErrorText)")
                    served += 1
                } else {
                    #expect(child.waitForExit(within: 20) == 1, "ulimit -n \(limit): \(child.standardErrorText)")
                    let said = child.standardErrorText
                    #expect(said.contains("ulimit -n \(limit)") || said.contains("Too many open files"),
                            "ulimit -n \(limit): \(said)")
                    refused += 1
                }
            }
            #expect(refused > 0 && served > 0, "refused \(refused), served \(served)")
        }
    }

    @Test func tooManyHeaderFieldsGet431() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let headers = (0..<120).map { ("X-Extra-\($0)", "v") }
            let answer = try client.request("GET", "/healthz", headers: headers)
            #expect(answer.status == 431)
            #expect(answer.errorCode == "headers_too_large")
            #expect(answer.header("Content-Type") == "application/json; charset=utf-8")
            // Within the limit is fine.
            let fine = try Self.shared.get().client().request("GET", "/healthz", headers: Array(headers.prefix(80)))
            #expect(fine.status == 200)
        }
    }

    /// The per-connection memory is sized for the largest head sheetd accepts: 100 header fields
    /// (the count limit) with 40-byte values and the longest request id still reach sheetd.
    @Test func headAtTheHeaderCountLimitFitsTheConnectionMemory() async throws {
        try await offPool {
            let client = try Self.shared.get().client()
            let requestID = String(repeating: "r", count: 128)
            let headers = [("X-Request-Id", requestID)] + (0..<98).map { ("X-Extra-\($0)", String(repeating: "v", count: 40)) }
            let answer = try client.request("GET", "/healthz", headers: headers)
            #expect(answer.status == 200)
            #expect(answer.header("X-Request-Id") == requestID)
        }
    }

    /// A head that does not fit the per-connection memory is refused by libmicrohttpd itself.
    @Test func headLargerThanConnectionMemoryGet431() async throws {
        try await offPool {
            let port = try Self.shared.get().port
            let connection = try #require(WireConnection(port: port))
            let request = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 40_000) + "\r\n\r\n"
            guard case .answered(let answer) = connection.exchange(Array(request.utf8)) else {
                Issue.record("no well-formed answer to an oversized head")
                return
            }
            #expect(answer.status == 431)
            #expect(try Self.shared.get().client().request("GET", "/healthz").status == 200)
        }
    }

    // MARK: - Graceful shutdown

    /// SIGTERM while 64 connections keep sending: every request either got a complete answer or
    /// saw its connection closed before any byte of one; none was cut short; exit status 0
    /// within the grace.
    @Test func sigtermUnderLoadNeverTruncatesAnAnswer() async throws {
        try await offPool {
            let grace = 5.0
            let server = try SheetdProcess(["--shutdown-grace", "5s", "--log-level", "warn"])
            let setup = try server.client()
            let sessions = try (0..<8).map { _ in try Self.create(setup) }
            let quiet = try Self.create(setup) // nobody changes it: long-polls on it wait
            struct Tally {
                var answered = 0, answeredAfterSignal = 0, closed = 0, truncated: [String] = [], malformed: [String] = []
                var timedOut = 0, unexpected: [String] = []
            }
            let tally = Locked(Tally())
            let signalled = Atomic<Bool>(false)
            let finished = Atomic<Bool>(false)
            let loadEnded = DispatchSemaphore(value: 0)
            let port = server.port
            let load = Thread {
                onThreads(64) { worker in
                    var connection: WireConnection?
                    var sequence = 0
                    var failuresAfterSignal = 0
                    while !finished.load(ordering: .acquiring) && failuresAfterSignal < 3 {
                        if connection == nil || !(connection?.isOpen ?? false) {
                            connection = WireConnection(port: port, receiveTimeout: 10)
                            if connection == nil {
                                if signalled.load(ordering: .acquiring) { failuresAfterSignal += 1 }
                                usleep(20_000)
                                continue
                            }
                        }
                        sequence += 1
                        let id = sessions[worker % sessions.count]
                        let request: [UInt8]
                        switch worker < 4 ? 4 : sequence % 4 {
                        case 4:
                            // A long-poll: in flight when the signal comes, it must still get a whole answer.
                            request = Array("GET /sessions/\(quiet)/events?after=1&wait=3 HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                        case 0: request = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                        case 1: request = Array("POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".utf8)
                        case 2: request = Self.drag(id, to: (worker + sequence) % 8 < 4 ? "medium" : "large", headers: [])
                        default: request = Array("GET /sessions/\(id) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                        }
                        let afterSignal = signalled.load(ordering: .acquiring)
                        let outcome = connection!.exchange(request)
                        tally.withLock { t in
                            switch outcome {
                            case .answered(let answer):
                                t.answered += 1
                                if afterSignal { t.answeredAfterSignal += 1 }
                                let fine = [200, 201].contains(answer.status) || (answer.status == 503 && answer.errorCode == "shutting_down")
                                if !fine { t.unexpected.append("\(answer.status) \(String(decoding: answer.body, as: UTF8.self))") }
                            case .closedBeforeAnswer: t.closed += 1
                            case .truncated(let why): t.truncated.append(why)
                            case .malformed(let why): t.malformed.append(why)
                            case .timedOut: t.timedOut += 1
                            }
                        }
                        if case .answered = outcome { continue }
                        connection = nil
                        if afterSignal || signalled.load(ordering: .acquiring) { failuresAfterSignal += 1 }
                    }
                }
                loadEnded.signal()
            }
            load.start()
            // The load is running once a hundred answers came (30 s only end a failure; the
            // count is checked below).
            _ = eventuallyBlocking(within: .seconds(30), every: .milliseconds(10)) { tally.withLock { $0.answered } > 100 }
            let beforeSignal = tally.withLock { $0.answered }
            signalled.store(true, ordering: .releasing)
            // sheetd exits with status 1 if its stop outlasts the grace and a margin.
            let status = server.stop(signal: SIGTERM, timeout: grace + 60)
            // Let the workers see the closed port, then end them.
            Thread.sleep(forTimeInterval: 0.3)
            finished.store(true, ordering: .releasing)
            loadEnded.wait()
            let result = tally.withLock { $0 }
            #expect(status == 0)
            #expect(beforeSignal > 100, "the load ran before the signal (\(beforeSignal) answers)")
            #expect(result.truncated.isEmpty, "truncated: \(result.truncated.prefix(3))")
            #expect(result.malformed.isEmpty, "malformed: \(result.malformed.prefix(3))")
            #expect(result.timedOut == 0)
            #expect(result.unexpected.isEmpty, "\(result.unexpected.prefix(3))")
        }
    }
}
