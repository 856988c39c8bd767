import Locking
import CSQLite
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SessionStore
import SheetCore
import Synchronization

/// Before a file is used: one sheetd per directory, a read-only look at what the file is, and
/// the migrations that bring an older schema up to date.
extension SQLiteArchive {
    /// One sheetd per data directory: two would each believe their memory is the truth.
    static func lockDirectory(_ directory: String) throws(ArchiveError) -> Int32 {
        let lockPath = (directory.hasSuffix("/") ? directory : directory + "/") + "sheetd.lock"
        let fd = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ArchiveError("cannot open \(lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another sheetd is using \(directory)" : String(cString: strerror(errno))
            Glibc.close(fd)
            throw ArchiveError("cannot lock \(lockPath): \(reason)")
        }
        return fd
    }

    /// Read-only look at an existing file: whose it is, which schema, and whether it is intact.
    static func check(_ path: String) throws(ArchiveError) {
        var status = stat()
        guard stat(path, &status) == 0, status.st_size > 0 else { return }   // new (or empty) file
        let refuse = "refusing to start; the file was left as it is"
        let database: SQLiteDatabase
        do {
            database = try SQLiteDatabase(path: path, flags: SQLITE_OPEN_READONLY)
        } catch {
            throw ArchiveError("cannot open \(path): \(error); \(refuse)")
        }
        do {
            let application = Int32(truncatingIfNeeded: try database.integer("PRAGMA application_id"))
            let version = try database.integer("PRAGMA user_version")
            let objects = try database.integer("SELECT count(*) FROM sqlite_schema")
            if application != Schema.applicationID, !(application == 0 && objects == 0) {
                throw ArchiveError(.incompatible, "\(path) is not a sheetd database (SQLite application_id \(application), expected \(Schema.applicationID)); \(refuse)")
            }
            if version > Schema.currentVersion {
                throw ArchiveError(.incompatible, "\(path) has schema version \(version), newer than this sheetd knows (\(Schema.currentVersion)): it was written by a newer sheetd; \(refuse)")
            }
            let problems = try database.texts("PRAGMA quick_check")
            if problems != ["ok"] {
                throw ArchiveError(.damaged, "\(path) is damaged (quick_check: \(problems.prefix(3).joined(separator: "; "))); \(refuse)")
            }
        } catch let error as ArchiveError {
            throw error
        } catch let error as SQLiteError where error.isNotADatabase {
            throw ArchiveError(.damaged, "\(path) is not a SQLite database or is damaged (\(error)); \(refuse)")
        } catch {
            throw ArchiveError("cannot read \(path): \(error); \(refuse)")
        }
    }

    /// The file holds tables of an older schema: `migrate` would upgrade it (not create it, and
    /// not leave it as it is).
    static func hasOlderSchema(_ database: SQLiteDatabase) throws -> Bool {
        let version = Int(try database.integer("PRAGMA user_version"))
        return version > 0 && version < Schema.currentVersion
    }

    /// Brings the schema up to `Schema.currentVersion` in one transaction: all migrations or none.
    static func migrate(_ database: SQLiteDatabase) throws {
        try database.execute("BEGIN IMMEDIATE")
        do {
            let current = Int(try database.integer("PRAGMA user_version"))
            for migration in Schema.migrations where migration.version > current {
                try database.execute(migration.sql)
            }
            if current < Schema.currentVersion {
                try database.execute("PRAGMA user_version = \(Schema.currentVersion)")
                try database.execute("PRAGMA application_id = \(Schema.applicationID)")
            }
            try database.execute("COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }
}
