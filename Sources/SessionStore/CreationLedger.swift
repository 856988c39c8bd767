import SheetCore

/// The global ledger of `POST /sessions` idempotency keys. A key being served is marked pending,
/// so a concurrent retry waits for the first answer instead of creating a second session.
/// `create` commits the key's answer with the session; the ledger learns it only after that.
actor CreationLedger {
    private var ledger: IdempotencyLedger
    private var pending: [String: [CheckedContinuation<Void, Never>]] = [:]
    private let clock: StoreClock
    private let archive: any SessionArchive

    init(capacity: Int, clock: StoreClock, archive: any SessionArchive, restoring keys: [ArchivedKey]) {
        ledger = IdempotencyLedger(capacity: capacity)
        self.clock = clock
        self.archive = archive
        Self.store(keys, in: &ledger, archive: archive)
    }

    /// Takes the keys a restore read back (the ledger is empty until then: creates wait for it).
    func adopt(_ keys: [ArchivedKey]) {
        Self.store(keys, in: &ledger, archive: archive)
    }

    /// Keys over the capacity (a smaller --idempotency-keys than last time) leave the file too.
    private static func store(_ keys: [ArchivedKey], in ledger: inout IdempotencyLedger, archive: any SessionArchive) {
        var dropped: [ArchiveChange] = []
        for key in keys {
            for gone in ledger.store(key.answer, for: key.ledgerKey, fingerprint: key.fingerprint, now: key.storedAt) {
                dropped.append(.keyDropped(scope: nil, key: gone.key))
            }
        }
        if !dropped.isEmpty { _ = archive.submit(dropped) }
    }

    func perform(
        _ request: IdempotencyRequest, create: @Sendable () async -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        let key = IdempotencyLedger.Key(scope: nil, key: request.key)
        // The check is made again inside the continuation's body: the `await` may end this
        // turn first (reentrancy), and the first create may finish in between; parking on a key
        // that is no longer pending would wait forever.
        while pending[request.key] != nil {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if pending[request.key] != nil {
                    pending[request.key, default: []].append(continuation)
                } else {
                    continuation.resume()
                }
            }
        }
        switch ledger.lookup(key, fingerprint: request.fingerprint, now: clock.now()) {
        case .replay(let answer): return IdempotentAnswer(answer: answer, replayed: true)
        case .reused: throw StoreError(.idempotencyKeyReused)
        case .miss: break
        }
        pending[request.key] = []
        // `create` has committed the session together with its answer under this key.
        let answer = await create()
        if answer.status < 500 {
            let dropped = ledger.store(answer, for: key, fingerprint: request.fingerprint, now: clock.now())
            if !dropped.isEmpty { _ = archive.submit(dropped.map { .keyDropped(scope: nil, key: $0.key) }) }
        }
        for waiter in pending.removeValue(forKey: request.key) ?? [] { waiter.resume() }
        return IdempotentAnswer(answer: answer, replayed: false)
    }

    func expire() { ledger.expire(now: clock.now()) }
}
