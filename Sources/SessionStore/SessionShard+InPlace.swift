import SheetCore

/// Changes and reads made on the calling thread, without a task: a libmicrohttpd thread enters
/// the shard's executor in place (`InlineSerialExecutor.runIfIdle`) when nothing else holds it.
extension SessionShard {
    /// Runs `body` on the shard from the calling thread when nothing else holds or awaits the
    /// shard and nothing will need waiting for: the volatile archive (no commit to await, and a
    /// refusal or a read shows the session as it stands). nil, with `body` not run, otherwise.
    private nonisolated func inPlace<T: Sendable>(_ body: (isolated SessionShard) -> T) -> T? {
        guard !archiveKeepsChanges else { return nil }
        return entered(body)
    }

    /// Runs `body` on the shard from the calling thread when nothing else holds or awaits the
    /// shard, whatever the archive (the caller deals with what is left to wait for); nil, with
    /// `body` not run, otherwise. (`body` is passed on as it is: a closure literal handed to
    /// `assumeIsolated` here would check its isolation a second time.)
    nonisolated func entered<T: Sendable>(_ body: (isolated SessionShard) -> T) -> T? {
        executor.runIfIdle { assumeIsolated(body) }
    }

    /// `apply` without a task; nil (nothing applied) when `inPlace` cannot run: use `apply`.
    nonisolated func applyInPlace(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) -> Result<ActionResult, StoreError>? {
        inPlace { shard -> Result<ActionResult, StoreError> in
            switch shard.applyNow(action, to: id, of: tenant, ifMatch: ifMatch) {
            case .done(let result):
                return .success(result)
            case .refused(let error):
                return .failure(error)
            case .committing:
                // `submit` leaves a commit outstanding only for an archive that keeps changes.
                preconditionFailure("the volatile archive left a commit outstanding")
            }
        }
    }

    /// `snapshot` without a task; nil when `inPlace` cannot run: use `snapshot`.
    nonisolated func snapshotInPlace(_ id: SessionID, of tenant: Tenant) -> Result<SessionSnapshot, StoreError>? {
        inPlace { shard -> Result<SessionSnapshot, StoreError> in
            guard let snapshot = shard.snapshotNow(id, of: tenant) else { return .failure(StoreError(.sessionNotFound)) }
            return .success(snapshot)
        }
    }
}
