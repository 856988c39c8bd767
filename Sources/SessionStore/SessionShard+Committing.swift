import SheetCore

/// Handing a shard's changes to the archive, and waiting for them: what makes an answer wait
/// until what it shows is committed (see `SessionShard`'s description of durability).
extension SessionShard {
    /// Submits this turn's changes of session `id` and waits for their commit (or, with no
    /// changes of its own, for the session's newest outstanding commit, which the answer may
    /// reflect); then publishes the session's events up to `version`.
    ///
    /// Inlined into its callers, with its synchronous part and its waiting part apart: when
    /// nothing is outstanding (the volatile archive) no async frame is allocated for it at all.
    @inline(__always)
    func persist(_ changes: [ArchiveChange], of id: SessionID, previousVersion: UInt64, version: UInt64,
                 others: [CommittedWith] = []) async throws(StoreError) {
        guard let commit = submit(changes, of: id, previousVersion: previousVersion, version: version, others: others) else { return }
        try await publish(after: commit, of: id, version: version, others: others)
    }

    /// Submits the changes; returns the commit to wait for, or nil when nothing is outstanding
    /// (then the events up to `version` are published already). `others` are the other sessions
    /// of a chain step in `changes`: one submit, so one transaction.
    @inline(never)
    func submit(_ changes: [ArchiveChange], of id: SessionID, previousVersion: UInt64, version: UInt64,
                others: [CommittedWith] = []) -> ArchiveCommit? {
        let commit: ArchiveCommit?
        if changes.isEmpty {
            catchUp(id, through: previousVersion)
            commit = inFlight.isEmpty ? nil : inFlight[id]?.commit
        } else {
            let submitted = archive.submit(changes)
            if submitted.isCommitted {
                // An entry left by an earlier commit goes first, its events published.
                catchUp(id, through: previousVersion)
                for other in others { catchUp(other.id, through: other.previousVersion) }
                commit = nil
            } else {
                commit = submitted
                track(id, previousVersion: previousVersion, commit: submitted)
                for other in others { track(other.id, previousVersion: other.previousVersion, commit: submitted) }
            }
        }
        guard let commit else {
            // Nothing outstanding (the volatile archive, or all committed): publish at once, to
            // whoever listens (with nobody listening to any session, not even a lookup).
            guard hasListeners else { return nil }
            for other in others where other.version > other.previousVersion {
                if let entry = sessions[other.id] {
                    publish(of: other.id, sheet: entry.sheet, after: other.previousVersion, through: other.version)
                }
            }
            if version > previousVersion, let entry = sessions[id] {
                publish(of: id, sheet: entry.sheet, after: previousVersion, through: version)
            }
            return nil
        }
        return commit
    }

    /// Records `commit` as session `id`'s newest. An entry left by an earlier commit that is done
    /// is reused: everything up to `previousVersion` is committed, and published first if anyone
    /// reads it. One dictionary lookup.
    private func track(_ id: SessionID, previousVersion: UInt64, commit: ArchiveCommit) {
        let unpublished = { (flight: inout InFlight) -> UInt64? in
            guard flight.commit !== commit else { return nil }   // new
            var from: UInt64?
            if flight.commit.isCommitted {
                if previousVersion > flight.durableVersion { from = flight.durableVersion }
                flight.durableVersion = previousVersion
            }
            flight.commit = commit
            return from
        }(&inFlight[id, default: InFlight(commit: commit, durableVersion: previousVersion)])
        if let from = unpublished, hasEventReaders(id), let entry = sessions[id] {
            publish(of: id, sheet: entry.sheet, after: from, through: previousVersion)
        }
    }

    /// Waits for `commit`, after which everything of session `id` up to `version` is
    /// committed, and publishes what no later commit has published already. A commit that
    /// failed (the archive is closed) publishes nothing and fails the request: the change was
    /// made in memory but is not stored, so it must not be acknowledged.
    @inline(never)
    func publish(after commit: ArchiveCommit, of id: SessionID, version: UInt64, others: [CommittedWith] = []) async throws(StoreError) {
        do { try await commit.wait() } catch { throw StoreError(.shuttingDown) }
        published(commit, of: id, version: version, others: others)
    }

    /// After `commit`, which holds everything of session `id` up to `version` (and of `others`):
    /// publishes what no later commit has published already. Every session of a chain step is
    /// published in this one actor turn: no reader sees part of it. The others first: a
    /// cascade's sheets above went down before the target did.
    func published(_ commit: ArchiveCommit, of id: SessionID, version: UInt64, others: [CommittedWith]) {
        for other in others { committed(commit, of: other.id, version: other.version) }
        committed(commit, of: id, version: version)
    }

    /// After `commit`: the session is durable up to `version`; its events up to there go out.
    /// When `commit` is the session's newest, it holds everything the session is now (a later
    /// change submitted in the same group too), so all of it goes out and the entry goes.
    private func committed(_ commit: ArchiveCommit, of id: SessionID, version: UInt64) {
        guard var flight = inFlight[id] else { return }   // a later commit already published past us
        let from = flight.durableVersion
        let entry = sessions[id]
        var through = version
        if flight.commit === commit {
            inFlight[id] = nil
            through = max(version, entry?.sheet.version ?? version)
        } else if version > from {
            flight.durableVersion = version
            inFlight[id] = flight
        }
        if through > from, let entry {
            publish(of: id, sheet: entry.sheet, after: from, through: through)
        }
    }

    /// Settles an entry of `inFlight` that outlived its commit: publishes the session's events up
    /// to `version` (what that commit holds: the session's version before any change of this
    /// turn; nil, at the start of a turn before anything changes: its version now) and drops the
    /// entry. Returns true, with nothing done, when the session's newest commit is not done.
    @discardableResult
    func catchUp(_ id: SessionID, through version: UInt64? = nil) -> Bool {
        guard !inFlight.isEmpty, let index = inFlight.index(forKey: id) else { return false }
        let flight = inFlight.values[index]
        guard flight.commit.isCommitted else { return true }
        inFlight.remove(at: index)
        guard hasEventReaders(id), let entry = sessions[id] else { return false }
        let through = version ?? entry.sheet.version
        if through > flight.durableVersion {
            publish(of: id, sheet: entry.sheet, after: flight.durableVersion, through: through)
        }
        return false
    }

    /// Whether anyone takes session `id`'s events as they are published (long-polls, streams).
    func hasEventReaders(_ id: SessionID) -> Bool {
        (!waiters.isEmpty && waiters[id] != nil) || (!subscribers.isEmpty && subscribers[id] != nil)
    }

    /// A reader started waiting for session `id`'s events, which a change answered in place may
    /// have left to whoever comes next (`InFlight`): publish after the session's newest commit,
    /// everything up to its version now. (When that change's request publishes too, the second
    /// publication finds nothing left: `committed`.)
    func arrangePublication(of id: SessionID) {
        guard !inFlight.isEmpty, let flight = inFlight[id], let entry = sessions[id] else { return }
        let commit = flight.commit
        let publication = PendingCommit.Publication(id: id, version: entry.sheet.version, others: [])
        commit.whenDone { [self] committed in
            guard committed else { return }   // never stored: nothing to publish
            publishCommitted(commit, publication) { _ in }
        }
    }

    /// Waits until whatever of session `id` is in memory now is committed, for answers that show
    /// it; throws when it never will be (the archive is closed).
    func settled(_ id: SessionID) async throws(StoreError) {
        guard let commit = inFlight[id]?.commit, !commit.isCommitted else { return }
        do { try await commit.wait() } catch { throw StoreError(.shuttingDown) }
    }

    /// The version event readers may see: the committed one.
    func durableVersion(_ id: SessionID, _ entry: Entry) -> UInt64 {
        inFlight[id]?.durableVersion ?? entry.sheet.version
    }
}
