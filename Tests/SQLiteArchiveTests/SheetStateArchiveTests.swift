import Foundation
import SessionStore
@testable import SheetCore
@testable import SQLiteArchive
import Testing

/// The state beyond phase and detent (changes, container height, navigation stack) comes back
/// from the file exactly, through start-up's fast path that builds sheets from their parts.
@Suite("SQLite archive: the rest of a sheet's state")
struct SheetStateArchiveTests {
    @Test func changesHeightAndStackSurviveReopening() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        let config = try seedConfiguration()
        let editedID = SessionID.random()
        var edited = Sheet(configuration: config, now: t0)
        let plainID = SessionID.random()
        let plain = Sheet(configuration: config, now: t0)

        let archive = try SQLiteArchive.open(directory: directory.path)
        _ = try archive.load()
        var commits = [archive.submit([.created(editedID, ordinal: 1, sheet: edited, lastAccess: 10, tenant: .default),
                                       .created(plainID, ordinal: 2, sheet: plain, lastAccess: 11, tenant: .default)])]
        let actions: [SheetAction] = [.changes(hasChanges: true), .resize(containerHeight: 390.5),
                                      .navigate(.push("details")), .navigate(.push("photo-1")), .navigate(.pop(1))]
        for (index, action) in actions.enumerated() {
            commits.append(archive.submit([try step(&edited, editedID, ordinal: 1, action, at: 1000 + Int64(index))]))
        }
        for commit in commits { try await commit.wait() }
        archive.close()

        let reopened = try SQLiteArchive.open(directory: directory.path)
        defer { reopened.close() }
        let byID = Dictionary(uniqueKeysWithValues: try reopened.load().sessions.map { ($0.id, $0.sheet) })
        #expect(byID[editedID] == edited)
        #expect(byID[editedID]?.hasChanges == true)
        #expect(byID[editedID]?.containerHeight == 390.5)
        #expect(byID[editedID]?.stack == ["root", "details"])
        #expect(byID[plainID] == plain)
    }
}
