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

    /// The result and what it waits for, taken apart: the result moves out instead of being
    /// copied (a snapshot's worth of retains, then as many releases) as a read of `result` is.
    public consuming func parts() -> (result: Result<Value, StoreError>, pending: PendingCommit?) {
        (result, pending)
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

    /// True when the commit has failed already: the change will never be stored.
    public var hasFailed: Bool { commit.hasFailed }

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
