import SheetCore

/// A result made on the calling thread without a task (`SessionStoring.changeInPlace`), and what
/// it must wait for before anybody may be shown it.
public struct InPlace<Value: Sendable>: Sendable {
    public let result: Result<Value, StoreError>
    /// nil: show `result` now. Otherwise show it once `pending` calls back, or the error that
    /// call reports instead (the change will never be stored, so it must not be acknowledged).
    public let pending: PendingCommit?

    public init(result: Result<Value, StoreError>, pending: PendingCommit? = nil) {
        self.result = result
        self.pending = pending
    }
}

/// The commit an answer made in place waits for, and, for a change, the publication of its
/// events on the session's shard after it: an answer given once `whenSettled` calls back shows
/// nothing that a crash could take back, and an event reader asked after it sees the events.
public struct PendingCommit: Sendable {
    /// The sessions whose events go out after the commit, as `SessionShard.publish(after:)` has them.
    struct Publication: Sendable {
        let id: SessionID
        let version: UInt64
        let others: [CommittedWith]
    }

    let shard: SessionShard
    let commit: ArchiveCommit
    /// nil when the answer only waits for the commit: a refusal or a read that shows a change
    /// still being committed (publishing it is that change's business), or a change of sessions
    /// nobody reads events of (the shard's next turn on them settles it: `SessionShard.catchUp`).
    let publication: Publication?

    /// Calls `body` once the commit is done and the events are published, with true; with false
    /// when the commit failed (the archive is closed: the change is never stored, so it must not
    /// be acknowledged). `body` runs on the thread that completes the commit (the archive's
    /// writer; it must not block), on a shard's thread when the shard was busy then, or right
    /// here when all of it is done already. With nothing to publish, `body` goes to the commit as
    /// it is: no closure of ours around it.
    public func whenSettled(_ body: @escaping @Sendable (_ committed: Bool) -> Void) {
        guard let publication else { return commit.whenDone(body) }
        commit.whenDone { [shard, commit] committed in
            guard committed else { return body(false) }
            shard.publishCommitted(commit, publication, then: body)
        }
    }
}

extension SessionShard {
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
        executor.runIfIdle {   // as `applyInPlace` calls its isolated work (SessionShard+InPlace.swift)
            unsafeBitCast(Self.changeNow as (isolated SessionShard, SheetAction, SessionID, Tenant, AcceptedVersions?) -> InPlace<ActionResult>,
                          to: Changing.self)(self, action, id, tenant, ifMatch)
        }
    }

    /// `snapshot` without a task, whatever the archive; nil when the shard is busy.
    nonisolated func readInPlace(_ id: SessionID, of tenant: Tenant) -> InPlace<SessionSnapshot>? {
        executor.runIfIdle {
            unsafeBitCast(Self.readNow as (isolated SessionShard, SessionID, Tenant) -> InPlace<SessionSnapshot>,
                          to: Reading.self)(self, id, tenant)
        }
    }

    /// `changeInPlace`'s turn on the shard.
    private static func changeNow(_ shard: isolated SessionShard, _ action: SheetAction, _ id: SessionID, _ tenant: Tenant,
                                  _ ifMatch: AcceptedVersions?) -> InPlace<ActionResult> {
        shard.changeNow(action, to: id, of: tenant, ifMatch: ifMatch)
    }

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
    private static func readNow(_ shard: isolated SessionShard, _ id: SessionID, _ tenant: Tenant) -> InPlace<SessionSnapshot> {
        shard.readNow(id, of: tenant)
    }

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
