import SessionStore
import SheetCore

/// Sheets over sheets in a batch: `SheetChain` works out a cascade on the loaded rows, and every
/// session it changes is written in the batch's one transaction. The batch holds the whole
/// chain locked (`Batch.chainLock`), so no instance changes any of its sheets meanwhile.
extension Batch {
    /// `SheetChain`'s look-up: `tenant`'s sessions as this batch has them; another tenant's,
    /// or a removed one, is none. `target` is being changed by the caller and is not looked up.
    func sheets(of tenant: Tenant, besides target: SessionID? = nil) -> (SessionID) -> Sheet? {
        let rows = self.rows
        return { id in
            guard id != target, let row = rows[id], row.tenant == tenant, row.change != .deleted else { return nil }
            return row.sheet
        }
    }

    /// A new session counted in and added as `created`.
    mutating func admit(_ sheet: Sheet, id: SessionID, root: String, tenant: Tenant) {
        sessionCount += 1
        lastOrdinal += 1
        countsChanged = true
        tenantCounts[tenant, default: 0] += 1
        rows[id] = Row(sheet: sheet, tenant: tenant, root: root, ordinal: lastOrdinal, lastAccess: milliseconds,
                       committedVersion: 0, change: .created)
    }

    /// Another session's new state and events from a cascade.
    mutating func record(_ change: ChainChange) {
        guard var row = rows[change.id] else { return }
        rows[change.id] = nil
        row.sheet = change.sheet
        row.lastAccess = milliseconds
        row.newEvents += change.events
        if row.change != .created { row.change = .changed }
        rows[change.id] = row
    }

    /// `id` created over `parent`, which records `covered`; in the parent's chain.
    mutating func present(_ id: SessionID, configuration: SheetConfiguration, over parent: SessionID,
                          for tenant: Tenant) -> Result<SessionSnapshot, StoreError> {
        let step: ChainOutcome
        do {
            step = try SheetChain.present(id, configuration: configuration, over: parent, in: sheets(of: tenant), now: now)
        } catch {
            return .failure(StoreError(.sheet(error)))
        }
        let root = rows[parent]?.root ?? parent.description
        for change in step.changes {
            if change.id == id {
                admit(change.sheet, id: id, root: root, tenant: tenant)
            } else {
                record(change)
            }
        }
        guard let created = rows[id] else { return .failure(StoreError(.sessionNotFound)) }
        return .success(SessionSnapshot(id: id, sheet: created.sheet))
    }

    /// Removes `id` and every session created over it (dismissed ones too), descendants first,
    /// and uncovers the sheet below when `id` covered it.
    mutating func deleteChain(from id: SessionID, _ row: Row) -> DeletedSessions {
        let live = rows.filter { $0.value.change != .deleted && $0.value.tenant == row.tenant }
        let doomed = SheetChain.removalOrder(of: id) { parent in
            live.compactMap { $0.value.sheet.parent == parent ? $0.key : nil }
        }
        let below = SheetChain.delete(id, row.sheet, in: sheets(of: row.tenant), now: now)
        for gone in doomed where rows[gone] != nil {
            rows[gone]?.change = .deleted
            sessionCount -= 1
            countsChanged = true
        }
        for change in below { record(change) }
        return DeletedSessions(count: doomed.count, events: below.flatMap(\.events))
    }

    var milliseconds: Int64 { now.millisecondsSince1970 }
}
