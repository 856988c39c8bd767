import Foundation
import Testing

/// Data files written by older sheetd builds (Tests/Fixtures/make-fixture.sh), each committed
/// with the answers that build gave for it: schema 2 (before tenants) and schema 3 (the last
/// landed build before the file kept changes, container heights, navigation stacks and chains).
/// A newer sheetd must open a copy, migrate it, and answer every session as before: each member
/// the old answer had, with the same value, and new members besides.
@Suite("Migration of an older data file")
struct MigrationTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// `old` is contained in `new`: objects member by member (extra members in `new` allowed),
    /// arrays element by element, anything else equal.
    static func contained(_ old: Any, in new: Any, at path: String = "") -> String? {
        switch (old, new) {
        case let (o as [String: Any], n as [String: Any]):
            for (key, value) in o {
                guard let other = n[key] else { return "\(path).\(key) is missing" }
                if let problem = contained(value, in: other, at: path + "." + key) { return problem }
            }
            return nil
        case let (o as [Any], n as [Any]):
            guard o.count == n.count else { return "\(path) has \(n.count) elements, not \(o.count)" }
            for (index, pair) in zip(o, n).enumerated() {
                if let problem = contained(pair.0, in: pair.1, at: "\(path)[\(index)]") { return problem }
            }
            return nil
        default:
            return canonicalJSON(old) == canonicalJSON(new) ? nil : "\(path): \(new) instead of \(old)"
        }
    }

    @Test("an older file opens with its sessions intact", arguments: ["schema-2", "schema-3"])
    func olderFileOpensWithItsSessionsIntact(_ name: String) async throws {
        try await offPool { try Self.openFixture(Self.fixtures.appendingPathComponent(name)) }
    }

    static func openFixture(_ fixture: URL) throws {
        let directory = NSTemporaryDirectory() + "sheetd-migration-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.copyItem(atPath: fixture.appendingPathComponent("sheetd.sqlite3").path,
                                         toPath: directory + "/sheetd.sqlite3")
        let lines = try String(contentsOf: fixture.appendingPathComponent("answers.jsonl"), encoding: .utf8)
            .split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) }
        #expect(lines.count == 14)

        // The fixture's sessions were last touched when it was made: a long TTL keeps the sweep
        // from removing them before they are read.
        let server = try SheetdProcess(["--data-dir", directory, "--session-ttl", "36500d"])
        defer { _ = server.stop() }
        let client = try server.client()
        for pair in stride(from: 0, to: lines.count, by: 2) {
            let session = try #require(lines[pair] as? [String: Any])
            let id = try #require(session["id"] as? String)
            let now = try client.request("GET", "/sessions/\(id)")
            #expect(now.status == 200)
            #expect(contained(session, in: now.json) == nil, "session \(id): \(contained(session, in: now.json) ?? "")")
            let events = try client.request("GET", "/sessions/\(id)/events")
            #expect(contained(lines[pair + 1], in: events.json) == nil,
                    "events of \(id): \(contained(lines[pair + 1], in: events.json) ?? "")")
        }
        // Carrying on from the migrated state: the confirming session takes its answer.
        let asking = try #require((lines[0] as? [String: Any])?["id"] as? String)
        let saved = try client.request("POST", "/sessions/\(asking)/confirm", body: #"{"action":"save"}"#)
        #expect(saved.status == 200)
        #expect((saved.json["session"] as? [String: Any])?["phase"] as? String == "dismissed")
        #expect(server.stop() == 0)
    }
}
