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
            commit = inFlight.isEmpty ? nil : inFlight[id]?.commit
        } else {
            let submitted = archive.submit(changes)
            if submitted.isCommitted {
                commit = nil
            } else {
                commit = submitted
                inFlight[id, default: InFlight(commit: submitted, durableVersion: previousVersion)].commit = submitted
                for other in others {
                    inFlight[other.id, default: InFlight(commit: submitted, durableVersion: other.previousVersion)].commit = submitted
                }
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

    /// Waits for `commit`, after which everything of session `id` up to `version` is
    /// committed, and publishes what no later commit has published already. A commit that
    /// failed (the archive is closed) publishes nothing and fails the request: the change was
    /// made in memory but is not stored, so it must not be acknowledged.
    @inline(never)
    func publish(after commit: ArchiveCommit, of id: SessionID, version: UInt64, others: [CommittedWith] = []) async throws(StoreError) {
        do { try await commit.wait() } catch { throw StoreError(.shuttingDown) }
        // Every session of a chain step is published in this one actor turn: no reader sees part
        // of it. The others first: a cascade's sheets above went down before the target did.
        for other in others { committed(commit, of: other.id, version: other.version) }
        committed(commit, of: id, version: version)
    }

    /// After `commit`: the session is durable up to `version`; its events up to there go out.
    private func committed(_ commit: ArchiveCommit, of id: SessionID, version: UInt64) {
        guard var flight = inFlight[id] else { return }   // a later commit already published past us
        let from = flight.durableVersion
        if flight.commit === commit {
            inFlight[id] = nil
        } else if version > from {
            flight.durableVersion = version
            inFlight[id] = flight
        }
        if version > from, let entry = sessions[id] {
            publish(of: id, sheet: entry.sheet, after: from, through: version)
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
