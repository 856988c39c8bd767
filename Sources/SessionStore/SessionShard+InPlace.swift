import SheetCore

/// Changes and reads made on the calling thread, without a task: a libmicrohttpd thread enters
/// the shard's executor in place (`InlineSerialExecutor.runIfIdle`) when nothing else holds it.
///
/// `applyInPlace` and `snapshotInPlace` run only when nothing else holds or awaits the shard and
/// nothing will need waiting for: the volatile archive (no commit to await, and a refusal or a
/// read shows the session as it stands); nil, with nothing done, otherwise. `changeInPlace` and
/// `readInPlace` (PendingCommit.swift) run whatever the archive, and say what is left to wait for.
///
/// `runIfIdle` makes the calling thread the executor's owner while its body runs, which is what
/// `assumeIsolated` would check (a runtime call and one more lock per request), so the isolated
/// work is called the way `assumeIsolated` calls its body, without the check: a static method
/// taking the shard as its isolated parameter, cast to the same function without `isolated`. A
/// closure capturing the arguments instead would cost two allocations a request on the way
/// through `withoutActuallyEscaping` and its reabstraction.
extension SessionShard {
    private typealias Applying = (SessionShard, SheetAction, SessionID, Tenant, AcceptedVersions?) -> Result<ActionResult, StoreError>
    private typealias Snapshotting = (SessionShard, SessionID, Tenant) -> Result<SessionSnapshot, StoreError>
    typealias Changing = (SessionShard, SheetAction, SessionID, Tenant, AcceptedVersions?) -> InPlace<ActionResult>
    typealias Reading = (SessionShard, SessionID, Tenant) -> InPlace<SessionSnapshot>

    /// Runs `body` on the shard from the calling thread when nothing else holds or awaits the
    /// shard, whatever the archive (the caller deals with what is left to wait for); nil, with
    /// `body` not run, otherwise. (`body` is passed on as it is: a closure literal handed to
    /// `assumeIsolated` here would check its isolation a second time.)
    nonisolated func entered<T: Sendable>(_ body: (isolated SessionShard) -> T) -> T? {
        executor.runIfIdle { assumeIsolated(body) }
    }

    /// `apply` without a task; nil (nothing applied) when it cannot run in place: use `apply`.
    nonisolated func applyInPlace(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) -> Result<ActionResult, StoreError>? {
        guard !archiveKeepsChanges else { return nil }
        return executor.runIfIdle {
            unsafeBitCast(Self.applied as (isolated SessionShard, SheetAction, SessionID, Tenant, AcceptedVersions?) -> Result<ActionResult, StoreError>,
                          to: Applying.self)(self, action, id, tenant, ifMatch)
        }
    }

    private static func applied(_ shard: isolated SessionShard, _ action: SheetAction, _ id: SessionID, _ tenant: Tenant,
                                _ ifMatch: AcceptedVersions?) -> Result<ActionResult, StoreError> {
        let applied = shard.applyNow(action, to: id, of: tenant, ifMatch: ifMatch)
        switch consume applied {
        case .done(let result):
            return .success(result)
        case .refused(let error):
            return .failure(error)
        case .committing:
            // `submit` leaves a commit outstanding only for an archive that keeps changes.
            preconditionFailure("the volatile archive left a commit outstanding")
        }
    }

    /// `snapshot` without a task; nil when it cannot run in place: use `snapshot`.
    nonisolated func snapshotInPlace(_ id: SessionID, of tenant: Tenant) -> Result<SessionSnapshot, StoreError>? {
        guard !archiveKeepsChanges else { return nil }
        return executor.runIfIdle {
            unsafeBitCast(Self.snapshotted as (isolated SessionShard, SessionID, Tenant) -> Result<SessionSnapshot, StoreError>,
                          to: Snapshotting.self)(self, id, tenant)
        }
    }

    private static func snapshotted(_ shard: isolated SessionShard, _ id: SessionID, _ tenant: Tenant) -> Result<SessionSnapshot, StoreError> {
        guard let snapshot = shard.snapshotNow(id, of: tenant) else { return .failure(StoreError(.sessionNotFound)) }
        return .success(snapshot)
    }
}
