import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The test support that gives a test its own PostgreSQL: it starts, answers on its URL, keeps
/// what was committed across an immediate stop (a crash) and a start on the same directory and
/// port, and leaves neither a process nor a directory behind.
@Suite("PostgreSQL test server", .serialized)
struct PostgresServerTests {
    @Test func answersOnItsURLAndKeepsCommittedRowsAcrossACrash() async throws {
        try await offPool {
            let (directory, postmaster) = try Self.useAndDrop()
            #expect(!FileManager.default.fileExists(atPath: directory))
            #expect(kill(postmaster, 0) != 0)
        }
    }

    /// Runs the checks on a server that is gone when this returns: its directory and last postmaster.
    static func useAndDrop() throws -> (String, pid_t) {
        let postgres = try PostgresServer()
        #expect(postgres.url == "postgresql://sheetd@127.0.0.1:\(postgres.port)/sheetd")
        #expect(try postgres.psql("select 1").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        #expect(try postgres.psql("select current_user || ' ' || current_database()")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "sheetd sheetd")
        try postgres.psql("create table marks (n integer primary key); insert into marks values (1), (2), (3)")

        postgres.stop(immediate: true)
        #expect(!postgres.isRunning)
        #expect(throws: ReapedChild.Failure.self) { try postgres.psql("select 1") }

        try postgres.start()
        #expect(try postgres.psql("select string_agg(n::text, ',' order by n) from marks")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "1,2,3")
        #expect(postgres.log.contains("database system was interrupted") || postgres.log.contains("not properly shut down"))

        let postmaster = try #require(Int32(
            String(contentsOfFile: postgres.dataDirectory + "/postmaster.pid", encoding: .utf8)
                .split(separator: "\n").first ?? ""))
        return (postgres.directory, postmaster)
    }

    @Test func listensOnLoopbackOnly() async throws {
        try await offPool {
            let postgres = try PostgresServer()
            #expect(try postgres.psql("show listen_addresses").trimmingCharacters(in: .whitespacesAndNewlines) == "127.0.0.1")
        }
    }
}
