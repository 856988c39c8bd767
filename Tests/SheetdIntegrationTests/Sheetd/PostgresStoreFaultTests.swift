import Foundation
import Polling
import PostgresStore
import SessionStore
import SheetCore
import Testing

/// The PostgreSQL store's schema and its faults: migrated once by whoever opens first, a newer
/// schema refused, the database gone and back.
@Suite("PostgreSQL store faults", .serialized)
struct PostgresStoreFaultTests {
    @Test func theFirstStoreMigratesAndANewerSchemaIsRefused() async throws {
        let fixture = try await PostgresStoreFixture()
        // Several stores opening at once: the advisory lock lets one migrate, the others find it done.
        let opened = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
            for _ in 0..<3 { group.addTask { try await fixture.open() } }
            var stores: [PostgresStore] = []
            for try await store in group { stores.append(store) }
            return stores
        }
        let versions = try await offPool { try fixture.server.psql("SELECT string_agg(version::text, ',') FROM schema_version") }
        #expect(versions.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        let created = try await opened[0].create(PostgresStoreFixture.twoDetents, for: .default)
        for store in opened { try await store.close() }

        _ = try await offPool { try fixture.server.psql("INSERT INTO schema_version (version) VALUES (99)") }
        let configuration = fixture.configuration()
        let refusal = await #expect(throws: ArchiveError.self) {
            _ = try await offPool { try PostgresStore.open(configuration) }
        }
        #expect(refusal?.message.contains("schema is version 99, newer than version 1") == true)
        // Nothing was touched: the session is still there for a binary that knows version 99.
        let count = try await offPool { try fixture.server.psql("SELECT count(*) FROM sessions WHERE id = '\(created.id)'") }
        #expect(count.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    @Test func anUnreachableDatabaseIsRefusedAtStart() async throws {
        let fixture = try await PostgresStoreFixture()
        let configuration = fixture.configuration()
        try await offPool { fixture.server.stop() }
        let refusal = await #expect(throws: ArchiveError.self) {
            _ = try await offPool { try PostgresStore.open(configuration) }
        }
        #expect(refusal?.message.contains("cannot use PostgreSQL") == true)
    }

    /// While PostgreSQL is down every operation fails with `unavailable` (the API's 503) and the
    /// store says why; once it is back the store serves again by itself, with everything that was
    /// committed before, and its presenters are woken to read what they may have missed.
    @Test func operationsAreUnavailableWhileTheDatabaseIsDownAndServedWhenItIsBack() async throws {
        let fixture = try await PostgresStoreFixture()
        let store = try await fixture.open()
        let created = try await store.create(PostgresStoreFixture.twoDetents, for: .default)
        _ = try await store.apply(.drag(.detent(.medium)), to: created.id, of: .default, ifMatch: nil)
        #expect(store.unavailableReason == nil)

        try await offPool { fixture.server.stop(immediate: true) }
        let failed = await storeError { () async throws(StoreError) in
            _ = try await store.apply(.drag(.detent(.large)), to: created.id, of: .default, ifMatch: nil)
        }
        guard case .unavailable(let reason)? = failed?.code.base else {
            Issue.record("expected unavailable, got \(String(describing: failed?.code))")
            return
        }
        #expect(!reason.isEmpty)
        #expect(await eventually { store.unavailableReason != nil })
        let read = await storeError { () async throws(StoreError) in _ = try await store.session(created.id, of: .default) }
        if case .unavailable? = read?.code.base {} else { Issue.record("a read while down: \(String(describing: read?.code))") }

        try await offPool { try fixture.server.start() }
        #expect(await eventually { store.unavailableReason == nil })
        var served: SessionSnapshot?
        _ = await eventually(every: .milliseconds(20)) {   // each try asks PostgreSQL
            served = try? await store.session(created.id, of: .default)
            return served != nil
        }
        #expect(served?.sheet.version == 2)   // the acknowledged drag is there, the refused one is not
        #expect(try await store.apply(.drag(.detent(.large)), to: created.id, of: .default, ifMatch: 2).session.sheet.version == 3)
        try await store.close()
    }
}
