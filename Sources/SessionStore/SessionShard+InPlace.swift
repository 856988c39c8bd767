import SheetCore

/// Changes and reads made on the calling thread, without a task: a libmicrohttpd thread enters
/// the shard's executor in place (`InlineSerialExecutor.runIfIdle`) when nothing else holds it.
/// They run whatever the archive, and say what their answer must wait for (`InPlace.pending`):
/// with the volatile archive nothing; with a durable one the commit, then the publication of
/// the change's events. When the shard is busy they return nil, with nothing done.
///
/// `runIfIdle` makes the calling thread the executor's owner while its body runs, which is what
/// `assumeIsolated` would check (a runtime call and one more lock per request), so the isolated
/// work is called the way `assumeIsolated` calls its body, without the check: a closure taking
/// the shard as its isolated parameter, cast to the same function without `isolated`. It
/// captures nothing, so it is a plain function the optimiser calls directly; a static method
/// converted there was boxed in an allocation per call, and a closure capturing the arguments
/// would cost two on the way through `withoutActuallyEscaping` and its reabstraction.
extension SessionShard {
    private typealias Changing = (SessionShard, SheetAction, SessionID, Tenant, AcceptedVersions?) -> InPlace<ActionResult>
    private typealias Reading = (SessionShard, SessionID, Tenant) -> InPlace<SessionSnapshot>
    private typealias Inserting = (SessionShard, Sheet, SessionID, UInt64, Tenant) -> PendingCommit?

    /// Runs `body` on the shard from the calling thread when nothing else holds or awaits the
    /// shard, whatever the archive (the caller deals with what is left to wait for); nil, with
    /// `body` not run, otherwise. (`body` is passed on as it is: a closure literal handed to
    /// `assumeIsolated` here would check its isolation a second time.)
    nonisolated func entered<T: Sendable>(_ body: (isolated SessionShard) -> T) -> T? {
        executor.runIfIdle { assumeIsolated(body) }
    }

    /// After `commit` of a change made in place: publishes it on the calling thread if the shard
    /// is idle (no task, no thread switch), else in a task on the shard; then calls `body`.
    nonisolated func publishCommitted(_ commit: ArchiveCommit, _ publication: PendingCommit.Publication,
                                      then body: @escaping @Sendable (_ committed: Bool) -> Void) {
        let done: Void? = entered { shard in
            shard.published(commit, of: publication.id, version: publication.version, others: publication.others)
        }
        if done != nil { return body(true) }
        Task {
            await self.published(commit, of: publication.id, version: publication.version, others: publication.others)
            body(true)
        }
    }

    /// `apply` without a task, whatever the archive: the change is made and submitted on the
    /// calling thread when the shard is idle, and the result says what its answer waits for
    /// (the commit, then the publication of its events). nil (nothing applied) when the shard
    /// is busy: use `apply`.
    nonisolated func changeInPlace(_ action: SheetAction, to id: SessionID, of tenant: Tenant,
                                   ifMatch: AcceptedVersions?) -> InPlace<ActionResult>? {
        executor.runIfIdle {
            unsafeBitCast({ (shard: isolated SessionShard, action: SheetAction, id: SessionID, tenant: Tenant, ifMatch: AcceptedVersions?) in
                              shard.changeNow(action, to: id, of: tenant, ifMatch: ifMatch) }
                          as (isolated SessionShard, SheetAction, SessionID, Tenant, AcceptedVersions?) -> InPlace<ActionResult>,
                          to: Changing.self)(self, action, id, tenant, ifMatch)
        }
    }

    /// `snapshot` without a task, whatever the archive; nil when the shard is busy.
    nonisolated func readInPlace(_ id: SessionID, of tenant: Tenant) -> InPlace<SessionSnapshot>? {
        executor.runIfIdle {
            unsafeBitCast({ (shard: isolated SessionShard, id: SessionID, tenant: Tenant) in shard.readNow(id, of: tenant) }
                          as (isolated SessionShard, SessionID, Tenant) -> InPlace<SessionSnapshot>, to: Reading.self)(self, id, tenant)
        }
    }

    /// `insert` (of a session over nothing, no Idempotency-Key) without a task, whatever the
    /// archive: admitted and submitted on the calling thread when the shard is idle. The outer
    /// nil: the shard is busy, nothing was done. The inner one: nothing to wait for (the
    /// volatile archive); otherwise the commit the answer waits for.
    nonisolated func insertInPlace(_ sheet: Sheet, id: SessionID, ordinal: UInt64, tenant: Tenant) -> PendingCommit?? {
        executor.runIfIdle {
            unsafeBitCast({ (shard: isolated SessionShard, sheet: Sheet, id: SessionID, ordinal: UInt64, tenant: Tenant) in
                              shard.insertNow(sheet, id: id, ordinal: ordinal, tenant: tenant) }
                          as (isolated SessionShard, Sheet, SessionID, UInt64, Tenant) -> PendingCommit?,
                          to: Inserting.self)(self, sheet, id, ordinal, tenant)
        }
    }

    /// `insertInPlace`'s turn on the shard: `insert` without waiting for the commit.
    ///
    /// A new session has no events to publish, so its answer waits for the commit alone, and its
    /// `inFlight` entry is left behind (`createdUnsettled`). The shard's next create in place drops
    /// the entries whose commits are done; settling each one after its commit instead took a turn
    /// on the shard from the archive's writer thread per create, a tenth of a durable create's cost.
    private func insertNow(_ sheet: Sheet, id: SessionID, ordinal: UInt64, tenant: Tenant) -> PendingCommit? {
        settleCreated()
        let change = admit(sheet, id: id, ordinal: ordinal, tenant: tenant)
        guard let commit = submit([change], of: id, previousVersion: sheet.version, version: sheet.version) else { return nil }
        createdUnsettled.append(id)
        return PendingCommit(shard: self, commit: commit, publication: nil)
    }

    /// Drops the `inFlight` entries of sessions created in place whose commits are done, oldest
    /// first, up to the first that is not: commits complete in order. An entry a later turn
    /// settled already (or a session deleted since) only leaves the list.
    private func settleCreated() {
        guard !createdUnsettled.isEmpty else { return }
        var settled = 0
        for id in createdUnsettled {
            if catchUp(id) { break }   // not done, nor are the commits of the creates after it
            settled += 1
        }
        createdUnsettled.removeFirst(settled)
    }

    /// `changeInPlace`'s turn on the shard.
    private func changeNow(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) -> InPlace<ActionResult> {
        let applied = applyNow(action, to: id, of: tenant, ifMatch: ifMatch)
        switch consume applied {
        case .done(let result):
            return InPlace(result: .success(result))
        case .committing(let result, let commit):
            let others = result.companions
            var readers = hasEventReaders(id)
            for other in others where !readers { readers = hasEventReaders(other.id) }
            // Nobody to publish to: the next turn that needs the sessions settles them.
            let publication = readers ? PendingCommit.Publication(id: id, version: result.session.sheet.version, others: others) : nil
            return InPlace(result: .success(result), pending: PendingCommit(shard: self, commit: commit, publication: publication))
        case .refused(let error):
            // A 412 or 409 shows the session as it stands: committed first (as `settled`).
            return InPlace(result: .failure(error), pending: outstanding(id))
        }
    }

    /// `readInPlace`'s turn on the shard.
    private func readNow(_ id: SessionID, of tenant: Tenant) -> InPlace<SessionSnapshot> {
        let snapshot = snapshotNow(id, of: tenant)
        // A change (or delete) not committed yet answers only once it is, as `snapshot` does.
        let pending = outstanding(id)
        guard let snapshot else { return InPlace(result: .failure(StoreError(.sessionNotFound)), pending: pending) }
        return InPlace(result: .success(snapshot), pending: pending)
    }

    /// What an answer showing session `id` as it stands must wait for: its newest commit, if
    /// that is not done.
    private func outstanding(_ id: SessionID) -> PendingCommit? {
        guard let commit = inFlight[id]?.commit, !commit.isCommitted else { return nil }
        return PendingCommit(shard: self, commit: commit, publication: nil)
    }
}
