import CSQLite
import Foundation
import Polling
import SheetCore
import SheetJSON
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Durable sessions against the real binary: a graceful restart, `kill -9` under load,
/// and files sheetd must refuse.
@Suite("Durability", .serialized)
struct DurabilityTests {
    static let seed = #"{"detents":["large","medium"],"defaultDetent":"large","thresholdDetent":"height:300"}"#

    static func temporaryDirectory() -> String {
        NSTemporaryDirectory() + "sheetd-durable-" + UUID().uuidString
    }

    static func events(_ response: TestResponse) -> [[String: Any]] {
        response.json["events"] as? [[String: Any]] ?? []
    }

    static func same(_ a: [[String: Any]], _ b: [[String: Any]]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { canonicalJSON($0) == canonicalJSON($1) }
    }

    // MARK: Restart

    @Test func seedScenarioCarriesOnAcrossARestart() async throws {
        try await offPool { try Self.seedScenarioAcrossARestart() }
    }

    static func seedScenarioAcrossARestart() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }

        // First half: medium, then the threshold: intercepted, waiting for a confirmation.
        let first = try SheetdProcess(["--data-dir", directory])
        #expect(first.stderr.contains("data: \(directory)/sheetd.sqlite3"))
        var client = try first.client()
        let created = try client.request("POST", "/sessions", body: seed)
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        #expect(try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#).status == 200)
        let intercepted = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
        #expect(intercepted.header("ETag") == "\"3\"")
        let logBefore = Self.events(try client.request("GET", "/sessions/\(id)/events"))
        #expect(logBefore.count == 3)
        #expect(first.stop() == 0)

        // Second life, same directory: the same session, exactly as it was.
        let second = try SheetdProcess(["--data-dir", directory])
        client = try second.client()
        let restored = try client.request("GET", "/sessions/\(id)")
        #expect(restored.status == 200)
        #expect(restored.header("ETag") == "\"3\"")
        #expect(restored.json["phase"] as? String == "confirming")
        #expect(restored.json["detent"] as? String == "medium")
        #expect(Self.same(Self.events(try client.request("GET", "/sessions/\(id)/events")), logBefore))

        // Second half: cancel, threshold again, discard, present. Versions continue from 3.
        let cancelled = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"cancel"}"#)
        #expect(Self.events(cancelled).first?["seq"] as? Int == 4)
        #expect(Self.events(cancelled).first?["type"] as? String == "confirmationCancelled")
        _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)
        let discarded = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"discard"}"#)
        #expect(Self.events(discarded).first?["reason"] as? String == "discarded")
        let presented = try client.request("POST", "/sessions/\(id)/present")
        #expect(presented.header("ETag") == "\"7\"")
        #expect((presented.json["session"] as? [String: Any])?["presentation"] as? Int == 2)

        let log = Self.events(try client.request("GET", "/sessions/\(id)/events"))
        #expect(log.compactMap { $0["type"] as? String } ==
                ["presented", "detentChanged", "intercepted", "confirmationCancelled", "intercepted", "dismissed", "presented"])
        #expect(log.compactMap { $0["seq"] as? Int } == Array(1...7))
        #expect(Self.same(Array(log.prefix(3)), logBefore))

        // A session created now lists after the old one: ordinals carried on.
        let newer = try #require(try client.request("POST", "/sessions", body: Self.seed).json["id"] as? String)
        let listed = (try client.request("GET", "/sessions").json["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
        #expect(listed == [id, newer])
        #expect(second.stop() == 0)
    }

    // MARK: Crash

    /// 64 connections of creates, drags, confirms, presents and dismisses, and the app's own
    /// actions (changes, select, resize, navigate), each with an Idempotency-Key; `kill -9` at a
    /// random moment; restart on the same directory. Every acknowledged action must be there,
    /// every session must equal a local replay of exactly the actions it acknowledged (plus, at
    /// most, the one it had in flight), and retrying the action in flight with its key must apply
    /// it exactly once.
    @Test func everyAcknowledgedActionSurvivesKill9() async throws {
        try await offPool { try Self.killNineRounds() }
    }

    static func killNineRounds() throws {
        let rounds = 10
        var acknowledged = 0
        var inFlightApplied = 0
        var inFlightTotal = 0
        var generator = SystemRandomNumberGenerator()
        let started = Date()
        for round in 0..<rounds {
            let directory = Self.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let server = try SheetdProcess(["--data-dir", directory, "--log-level", "off"])
            let answered = Counter()
            let clients = (0..<64).map { CrashClient(number: $0, port: server.port, round: round, answered: answered) }
            for client in clients { client.start() }
            // Vary the moment, counted in acknowledged actions (not in time, which a loaded or
            // sanitized run stretches): early in the ramp-up through well into steady load.
            let moment = Int.random(in: 64...1_000, using: &generator)
            let reached = eventuallyBlocking(within: .seconds(120)) { answered.value >= moment }   // only ends a failure
            #expect(reached, "round \(round): \(answered.value) of \(moment) actions acknowledged in 120 s")
            _ = server.stop(signal: SIGKILL)
            for client in clients { client.finished.wait() }

            let restarted = try SheetdProcess(["--data-dir", directory, "--log-level", "off"])
            let checker = try restarted.client()
            for client in clients {
                #expect(client.problems.isEmpty, "round \(round) after \(moment) acknowledged, client \(client.number): \(client.problems)")
                let outcome = try client.verify(with: checker)
                #expect(outcome.problems.isEmpty, "round \(round) after \(moment) acknowledged, client \(client.number): \(outcome.problems)")
                acknowledged += client.acknowledgedCount
                if client.inFlight != nil { inFlightTotal += 1 }
                if outcome.inFlightWasApplied { inFlightApplied += 1 }
            }
            #expect(restarted.stop() == 0)
        }
        let elapsed = Date().timeIntervalSince(started)
        print("crash test: \(rounds) rounds, \(acknowledged) acknowledged actions checked, \(inFlightApplied) of \(inFlightTotal) in-flight actions had been committed, \(Int(elapsed)) s")
    }

    // MARK: Files sheetd must not use

    /// Runs sheetd on `directory` and returns its exit status and standard error.
    static func runToExit(_ directory: String) throws -> (status: Int32, stderr: String) {
        do {
            let run = try runToEnd(SheetdProcess.binary, ["--data-dir", directory, "--port", "0"], within: 15)
            return (run.status, run.stderr)
        } catch {
            return (-1, "still running")
        }
    }

    /// Runs `sql` on the SQLite file at `path`, as another program would.
    static func sqlite(_ path: String, _ sql: String) throws {
        // As the archive does before it opens a file: SQLite's configuration is the process's, and
        // a plain `swift test` runs these tests beside the archive's, which check it.
        _ = sheetd_sqlite_disable_memory_statistics()
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw TestClientError(description: "cannot open \(path)") }
        defer { sqlite3_close(db) }
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw TestClientError(description: String(cString: sqlite3_errmsg(db)))
        }
    }

    @Test(arguments: ["corrupt", "foreign", "newer"])
    func aFileSheetdMustNotUseStopsItUntouched(_ kind: String) async throws {
        try await offPool { try Self.refuse(kind) }
    }

    static func refuse(_ kind: String) throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = directory + "/sheetd.sqlite3"
        let expected: String
        switch kind {
        case "corrupt":
            // A truncated download: the right header, then noise.
            var bytes = Array("SQLite format 3\0".utf8)
            bytes += (0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            expected = "not a SQLite database or is damaged"
        case "foreign":
            // Another program's database, dropped into the data directory by mistake.
            try Self.sqlite(file, "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
            expected = "is not a sheetd database"
        default:
            // A file from a newer sheetd: make a real one, then raise its schema version.
            let server = try SheetdProcess(["--data-dir", directory])
            _ = try server.client().request("POST", "/sessions", body: Self.seed)
            #expect(server.stop() == 0)
            try Self.sqlite(file, "PRAGMA user_version = 99")
            expected = "newer than this sheetd knows"
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        let (status, stderr) = try Self.runToExit(directory)
        #expect(status == 1)
        #expect(stderr.contains(expected), "stderr: \(stderr)")
        #expect(stderr.contains("left as it is"))
        #expect(!stderr.contains("listening on"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
    }
}

/// One of the crash test's 64 connections. It owns its sessions (no other client touches them),
/// so it knows exactly what each should hold: a local `Sheet` replays what was acknowledged.
// @unchecked Sendable: fields are written only by this client's own thread while the load runs; the test reads them only after that thread signalled `finished`.
final class CrashClient: @unchecked Sendable {

    struct Request {
        let method: String
        let path: String
        let body: String
        let key: String
        /// nil for a create.
        let session: Int?
        let action: SheetAction?
    }

    struct Tracked {
        let id: String
        /// The session after every action that was answered.
        var model: Sheet
        /// Every event an answer reported, as the wire carried it.
        var told: [[String: Any]] = []
    }

    let number: Int
    let port: Int
    let round: Int
    let finished = DispatchSemaphore(value: 0)
    /// Acknowledged actions of every client of the round, counted as they come: the kill's moment.
    let answered: Counter
    private(set) var sessions: [Tracked] = []
    private(set) var inFlight: Request?
    private(set) var lastAnswered: (request: Request, response: TestResponse)?
    private(set) var acknowledgedCount = 0
    private(set) var problems: [String] = []
    private var sent = 0
    static let configuration: SheetConfiguration = {
        do { return try SheetConfiguration(detents: [.large, .medium], defaultDetent: .large, thresholdDetent: .height(300)) } catch { fatalError("\(error)") }
    }()

    init(number: Int, port: Int, round: Int, answered: Counter) {
        self.number = number
        self.port = port
        self.round = round
        self.answered = answered
    }

    func start() {
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.start()
    }

    private func run() {
        guard let client = try? TestHTTPClient(port: port) else { return }
        var generator = SystemRandomNumberGenerator()
        while true {
            let request = next(using: &generator)
            inFlight = request
            let response: TestResponse
            do {
                response = try client.request(request.method, request.path, body: request.body,
                                              headers: [("Idempotency-Key", request.key)])
            } catch {
                return   // the server is gone; `inFlight` is the request whose fate is unknown
            }
            inFlight = nil
            record(request, response)
            // A short random pause: 64 of these still keep the server and its group commit busy
            // (many requests in flight at the kill), without taking both cores from tests beside.
            usleep(useconds_t.random(in: 0...3_000, using: &generator))
        }
    }

    /// Mostly what the sheet's phase allows (drags while presented, confirms while confirming,
    /// present when dismissed), sometimes anything (a 409 is an answer too), now and then a create.
    /// While presented, also the app's actions: unsaved changes on and off, a detent selected, the
    /// container resized (rotation), a screen pushed or popped.
    private func next(using generator: inout SystemRandomNumberGenerator) -> Request {
        sent += 1
        let key = "r\(round)-c\(number)-\(sent)"
        if sessions.isEmpty || (sessions.count < 6 && Int.random(in: 0..<12, using: &generator) == 0) {
            return Request(method: "POST", path: "/sessions", body: DurabilityTests.seed, key: key, session: nil, action: nil)
        }
        let index = Int.random(in: 0..<sessions.count, using: &generator)
        let phase = sessions[index].model.phase
        let roll = Int.random(in: 0..<20, using: &generator)
        let action: SheetAction
        switch (phase, roll) {
        case (_, 0): action = .present
        case (_, 1): action = .confirm(.cancel)
        case (.presented, 2): action = .dismiss(.done)
        case (.presented, 3): action = .changes(hasChanges: Bool.random(using: &generator))
        case (.presented, 4): action = .select([Detent.medium, .large][Int.random(in: 0..<2, using: &generator)])
        case (.presented, 5): action = .resize(containerHeight: [844, 390, 600][Int.random(in: 0..<3, using: &generator)])
        case (.presented, 6):
            action = .navigate(Bool.random(using: &generator) ? .push("screen\(sent % 4)") : .pop(Int.random(in: 1...2, using: &generator)))
        case (.presented, _):
            action = .drag(.detent([Detent.medium, .large, .height(300)][Int.random(in: 0..<3, using: &generator)]))
        case (.confirming, _): action = .confirm(Bool.random(using: &generator) ? .cancel : .discard)
        case (.dismissed, _): action = .present
        }
        let id = sessions[index].id
        let (route, body): (String, String) = switch action {
        case .drag(let target): ("drag", #"{"to":"\#(target)"}"#)
        case .confirm(let answer): ("confirm", #"{"action":"\#(answer.rawValue)"}"#)
        case .dismiss(let reason): ("dismiss", #"{"reason":"\#(reason.rawValue)"}"#)
        case .changes(let hasChanges): ("changes", #"{"hasChanges":\#(hasChanges)}"#)
        case .select(let detent): ("select", #"{"detent":"\#(detent)"}"#)
        case .resize(let height): ("resize", #"{"containerHeight":\#(Int(height))}"#)
        case .navigate(.push(let screen)): ("navigate", #"{"push":"\#(screen)"}"#)
        case .navigate(.pop(let count)): ("navigate", #"{"pop":\#(count)}"#)
        case .present, .gesture: ("present", "{}")
        }
        return Request(method: "POST", path: "/sessions/\(id)/\(route)", body: body, key: key, session: index, action: action)
    }

    private func record(_ request: Request, _ response: TestResponse) {
        lastAnswered = (request, response)
        guard let index = request.session, let action = request.action else {
            guard response.status == 201, let id = response.json["id"] as? String else {
                problems.append("create answered \(response.status) \(response.text)")
                return
            }
            acknowledge()
            sessions.append(Tracked(id: id, model: Sheet(configuration: Self.configuration, now: Timestamp(millisecondsSince1970: 0))))
            return
        }
        var model = sessions[index].model
        let applied = (try? model.apply(action, now: Timestamp(millisecondsSince1970: 0))) != nil
        switch response.status {
        case 200 where applied:
            acknowledge()
            sessions[index].model = model
            sessions[index].told += DurabilityTests.events(response)
            let version = (response.json["session"] as? [String: Any])?["version"] as? Int
            if version != Int(model.version) { problems.append("\(request.path): answered version \(version ?? -1), expected \(model.version)") }
        case 409 where !applied:
            acknowledge()
        default:
            problems.append("\(request.path) \(request.body): \(response.status) while the model \(applied ? "applied" : "refused") it")
        }
    }

    private func acknowledge() {
        acknowledgedCount += 1
        answered.increment()
    }

    /// What the restarted server holds, checked against what this client was told.
    func verify(with client: TestHTTPClient) throws -> (problems: [String], inFlightWasApplied: Bool) {
        var problems: [String] = []
        var inFlightWasApplied = false

        // The request in flight at the kill: retried with its key, it must take effect exactly once.
        var models = sessions.map(\.model)
        if let request = inFlight {
            if let index = request.session, let action = request.action {
                let stored = try client.request("GET", "/sessions/\(sessions[index].id)").json["version"] as? Int ?? -1
                var after = models[index]
                let applies = (try? after.apply(action, now: Timestamp(millisecondsSince1970: 0))) != nil
                if stored != Int(models[index].version) && stored != Int(after.version) {
                    problems.append("in-flight \(request.path): stored version \(stored), expected \(models[index].version) or \(after.version)")
                }
                let committed = stored == Int(after.version) && after.version != models[index].version
                inFlightWasApplied = committed
                let retry = try client.request(request.method, request.path, body: request.body, headers: [("Idempotency-Key", request.key)])
                if retry.status != (applies ? 200 : 409) { problems.append("retry of \(request.path): \(retry.status) \(retry.text)") }
                if committed && retry.header("Idempotent-Replayed") != "true" {
                    problems.append("retry of committed \(request.path) was applied again instead of replayed")
                }
                models[index] = after
            } else {
                let retry = try client.request("POST", "/sessions", body: request.body, headers: [("Idempotency-Key", request.key)])
                inFlightWasApplied = retry.header("Idempotent-Replayed") == "true"
                if retry.status != 201 { problems.append("retry of create: \(retry.status)") }
                if let id = retry.json["id"] as? String,
                   try client.request("GET", "/sessions/\(id)").json["version"] as? Int != 1 {
                    problems.append("retried create \(id) is not a fresh session")
                }
            }
        }

        // Every session: the events it was told about, then state and log equal to the replay.
        for (index, session) in sessions.enumerated() {
            let model = models[index]
            let stored = DurabilityTests.events(try client.request("GET", "/sessions/\(session.id)/events"))
            let bySeq = Dictionary(stored.compactMap { event in (event["seq"] as? Int).map { ($0, event) } }) { a, _ in a }
            for told in session.told {
                guard let seq = told["seq"] as? Int, let event = bySeq[seq], canonicalJSON(event) == canonicalJSON(told) else {
                    problems.append("\(session.id): acknowledged event \(told) is missing or different")
                    continue
                }
            }
            let expected = try model.events.map { event -> [String: Any] in
                var object = try JSONSerialization.jsonObject(with: Data(Rendering.eventText(event).utf8)) as? [String: Any] ?? [:]
                object["at"] = nil
                return object
            }
            let withoutTimes = stored.map { event -> [String: Any] in
                var event = event
                event["at"] = nil
                return event
            }
            if !DurabilityTests.same(withoutTimes, expected) {
                let differing = zip(withoutTimes, expected).first { canonicalJSON($0) != canonicalJSON($1) }
                problems.append("\(session.id): stored log \(withoutTimes.count) events, replay \(expected.count); first difference: stored \(differing.map { canonicalJSON($0.0) } ?? "-"), replay \(differing.map { canonicalJSON($0.1) } ?? "-")")
            }
            let state = try client.request("GET", "/sessions/\(session.id)").json
            if state["version"] as? Int != Int(model.version) || state["phase"] as? String != model.phase.rawValue
                || state["detent"] as? String != model.detent.description || state["presentation"] as? Int != model.presentation {
                problems.append("\(session.id): state \(state["version"] ?? "?")/\(state["phase"] ?? "?")/\(state["detent"] ?? "?"), replay \(model.version)/\(model.phase)/\(model.detent)")
            }
            if state["hasChanges"] as? Bool != model.hasChanges || state["stack"] as? [String] != model.stack
                || (state["containerHeight"] as? NSNumber)?.doubleValue != model.containerHeight {
                problems.append("\(session.id): changes/stack/height \(state["hasChanges"] ?? "?")/\(state["stack"] ?? "?")/\(state["containerHeight"] ?? "?"), replay \(model.hasChanges)/\(model.stack)/\(model.containerHeight)")
            }
        }

        // The last answer before the kill is replayed byte for byte.
        if let (request, response) = lastAnswered {
            let again = try client.request(request.method, request.path, body: request.body, headers: [("Idempotency-Key", request.key)])
            if again.status != response.status || again.body != response.body || again.header("Idempotent-Replayed") != "true" {
                problems.append("replay of \(request.path) differs: \(again.status) \(again.text)")
            }
        }
        return (problems, inFlightWasApplied)
    }
}
