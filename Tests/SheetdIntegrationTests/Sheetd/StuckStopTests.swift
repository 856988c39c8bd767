import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A stop that cannot finish must not leave sheetd half alive: past the grace and a margin it
/// exits with status 1 and says why, rather than hanging until someone kills it.
@Suite("A stop that hangs")
struct StuckStopTests {
    @Test func aStopBlockedOnTheDatabaseExitsWithStatusOneAndSaysSo() async throws {
        try await offPool {
            let database = try PostgresServer()
            let server = try SheetdProcess(["--database", database.url, "--shutdown-grace", "1s"])
            let client = try server.client()
            let created = try client.request("POST", "/sessions", body: "{}")
            #expect(created.status == 201)
            let id = try #require(created.json["id"] as? String)
            // A read: closing the store saves when it happened, in a commit of its own on the
            // first committer, and that commit is the one that never returns once PostgreSQL is
            // stopped (the backends of sheetd's connections, not psql's, and the postmaster).
            // /metrics counts sessions through the first committer, so it holds a connection
            // by then: a committer still without one would time out connecting instead.
            #expect(try client.request("GET", "/sessions/\(id)").status == 200)
            #expect(try client.request("GET", "/metrics").status == 200)
            let backends = try database.psql("SELECT pid FROM pg_stat_activity WHERE datname = 'sheetd' AND pid <> pg_backend_pid()")
                .split(separator: "\n").compactMap { pid_t($0.trimmingCharacters(in: .whitespaces)) }
            #expect(!backends.isEmpty)
            let postmaster = try #require(database.postmasterPID)
            let stopped = [postmaster] + backends
            for pid in stopped { kill(pid, SIGSTOP) }

            let status = server.stop(timeout: 120)
            for pid in stopped { kill(pid, SIGCONT) }
            database.stop(immediate: true)
            #expect(status == 1)
            #expect(server.stderr.contains("shutdown did not finish within"), "\(server.stderr.suffix(2000))")
        }
    }
}
