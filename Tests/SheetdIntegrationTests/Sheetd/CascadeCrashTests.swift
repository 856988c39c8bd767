import Foundation
import Polling
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `kill -9` at random moments while clients build chains of three sheets and take them down
/// (dismiss the root or the middle, delete the root or the middle): after a restart, no chain is
/// ever half of a cascade, whatever moment the process died at.
@Suite("Cascades and kill -9", .serialized)
struct CascadeCrashTests {
    @Test func noCascadeIsEverHalfDoneAfterKill9() async throws {
        try await offPool { try Self.rounds() }
    }

    /// The check itself finds each kind of half: without this, a checker that sees nothing would
    /// pass the crash test whatever the server did.
    @Test(arguments: [
        // The parent went down, the child still stands over it.
        (["P": ["phase": "dismissed", "parent": nil, "child": "C"], "C": ["phase": "presented", "parent": "P", "child": nil]], 1),
        // The child went down with its parent, which still stands.
        (["P": ["phase": "presented", "parent": nil, "child": nil],
          "C": ["phase": "dismissed", "parent": "P", "child": nil, "dismissReason": "parentDismissed"]], 1),
        // The parent is gone, the child is not.
        (["C": ["phase": "presented", "parent": "P", "child": nil]], 1),
        // A whole cascade, and a chain left standing: nothing to report.
        (["P": ["phase": "dismissed", "parent": nil, "child": nil],
          "C": ["phase": "dismissed", "parent": "P", "child": nil, "dismissReason": "parentDismissed"],
          "R": ["phase": "presented", "parent": nil, "child": "S"], "S": ["phase": "presented", "parent": "R", "child": nil]], 0),
    ] as [([String: [String: String?]], Int)])
    func theCheckFindsHalfOfACascade(sessions: [String: [String: String?]], expected: Int) {
        let asJSON = sessions.mapValues { $0.mapValues { $0.map { $0 as Any } ?? NSNull() } }
        #expect(Self.problems(in: asJSON).count == expected, "\(Self.problems(in: asJSON))")
    }

    static func rounds() throws {
        let rounds = 6
        var generator = SystemRandomNumberGenerator()
        var cascadesSeen = 0
        var chainsSeen = 0
        for round in 0..<rounds {
            let directory = DurabilityTests.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let server = try SheetdProcess(["--data-dir", directory, "--log-level", "off"])
            let chains = Counter()
            let clients = (0..<8).map { _ in ChainClient(port: server.port, chains: chains) }
            for client in clients { client.start() }
            // The moment is counted in chains made (not in time, which a loaded or sanitized run
            // stretches), enough that every round sees some of each ending.
            let moment = Int.random(in: 10...60, using: &generator)
            let made = eventuallyBlocking(within: .seconds(120)) { chains.value >= moment }   // only ends a failure
            #expect(made, "round \(round): \(chains.value) of \(moment) chains made in 120 s")
            _ = server.stop(signal: SIGKILL)
            for client in clients { client.finished.wait() }

            let restarted = try SheetdProcess(["--data-dir", directory, "--log-level", "off"])
            let sessions = try Self.everySession(try restarted.client())
            let problems = Self.problems(in: sessions)
            #expect(problems.isEmpty, "round \(round), killed after \(moment) chains: \(problems.prefix(5))")
            cascadesSeen += sessions.values.filter { $0["dismissReason"] as? String == "parentDismissed" }.count
            chainsSeen += sessions.values.filter { !($0["parent"] is NSNull) }.count
            #expect(restarted.stop() == 0)
        }
        print("cascade crash test: \(rounds) rounds, \(chainsSeen) sessions over a parent, \(cascadesSeen) taken down by a cascade, all whole")
        #expect(cascadesSeen > 0 && chainsSeen > rounds, "too little happened before the kills for the test to mean anything")
    }

    /// Every session the server holds, by id, paging through the listing.
    static func everySession(_ client: TestHTTPClient) throws -> [String: [String: Any]] {
        var sessions: [String: [String: Any]] = [:]
        var cursor: String?
        repeat {
            let page = try client.request("GET", "/sessions?limit=1000" + (cursor.map { "&after=\($0)" } ?? ""))
            for session in page.json["sessions"] as? [[String: Any]] ?? [] {
                if let id = session["id"] as? String { sessions[id] = session }
            }
            cursor = page.json["next"] as? String
        } while cursor != nil
        return sessions
    }

    /// What a half-done cascade (or create, or delete) would leave: a covered sheet whose child is
    /// not presented over it, a presented sheet whose parent is gone, dismissed or not covered by
    /// it, a sheet taken down with its parent while that parent still stands.
    static func problems(in sessions: [String: [String: Any]]) -> [String] {
        var problems: [String] = []
        for (id, session) in sessions {
            let phase = session["phase"] as? String
            if let child = session["child"] as? String {
                let above = sessions[child]
                if above == nil { problems.append("\(id) is covered by \(child), which is gone") }
                if let above, above["parent"] as? String != id || above["phase"] as? String == "dismissed" {
                    problems.append("\(id) is covered by \(child), which is not presented over it")
                }
                if phase != "presented" { problems.append("\(id) is covered while \(phase ?? "?")") }
            }
            guard let parent = session["parent"] as? String else { continue }
            guard let below = sessions[parent] else {
                problems.append("\(id) is presented over \(parent), which is gone")
                continue
            }
            if phase != "dismissed", below["child"] as? String != id {
                problems.append("\(id) is \(phase ?? "?") but \(parent) is not covered by it")
            }
            if session["dismissReason"] as? String == "parentDismissed", below["phase"] as? String != "dismissed" {
                problems.append("\(id) went down with \(parent), which is still \(below["phase"] as? String ?? "?")")
            }
        }
        return problems
    }
}

/// Builds chains of three sheets and takes them down, one request at a time, until the server
/// is gone.
final class ChainClient: @unchecked Sendable {
    // @unchecked Sendable: everything but `finished` is used only by the client's own thread.
    let port: Int
    let finished = DispatchSemaphore(value: 0)
    /// Chains made and ended by every client of the round: the kill's moment.
    let chains: Counter

    init(port: Int, chains: Counter) {
        self.port = port
        self.chains = chains
    }

    func start() {
        let thread = Thread { [self] in
            try? run()
            finished.signal()
        }
        thread.start()
    }

    private func run() throws {
        let client = try TestHTTPClient(port: port)
        var generator = SystemRandomNumberGenerator()
        func create(over parent: String?) throws -> String? {
            let body = parent.map { "{\"parent\":\"\($0)\"}" } ?? "{}"
            return try client.request("POST", "/sessions", body: body).json["id"] as? String
        }
        while true {
            guard let root = try create(over: nil), let middle = try create(over: root),
                  let top = try create(over: middle) else { return }
            _ = try client.request("POST", "/sessions/\(top)/navigate", body: #"{"push":"details"}"#)
            switch Int.random(in: 0..<5, using: &generator) {
            case 0: _ = try client.request("POST", "/sessions/\(root)/dismiss", body: #"{"reason":"done"}"#)
            case 1: _ = try client.request("POST", "/sessions/\(middle)/dismiss")
            case 2: _ = try client.request("DELETE", "/sessions/\(middle)")
            case 3: _ = try client.request("DELETE", "/sessions/\(root)")
            default: break   // left standing: the whole chain must come back linked
            }
            chains.increment()
        }
    }
}
