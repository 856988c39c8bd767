import Locking
import SheetCore
import Synchronization

/// Where sessions outlive the process. The shards stay the only writers of their sessions: they
/// change a session in memory, hand the change to the archive in the same actor turn, and answer
/// only once `ArchiveCommit` says the change is committed. Another backend implements this
/// protocol; nothing above the store knows which one runs.
///
/// An archive that cannot commit a change must not complete its commit: it stops the process
/// (after saying why on standard error), so nothing unrecorded is ever acknowledged, and a
/// restart carries on from what was committed.
public protocol SessionArchive: AnyObject, Sendable {
    /// Everything stored, read once at start-up before any request is served.
    func load() throws(ArchiveError) -> ArchiveContents

    /// Queues `changes` behind everything submitted before and returns the commit that makes them
    /// durable. Never blocks: shards call it inside their actor turn, which is what keeps each
    /// session's changes in the order they happened. Commits complete in submission order.
    /// After `close` the commit returned has failed: nothing submitted then is ever stored.
    func submit(_ changes: [ArchiveChange]) -> ArchiveCommit

    /// Commits what is queued, then releases the storage. Later submits fail their commits.
    func close()

    /// False for an archive that drops what it is given: shards then skip describing changes.
    var keepsChanges: Bool { get }
}

extension SessionArchive {
    public var keepsChanges: Bool { true }
}

/// One change to what is stored. A request's changes are submitted together and commit together,
/// so an action and the idempotency answer it produced are never stored one without the other.
public enum ArchiveChange: Sendable {
    /// A new session, with its first event.
    case created(SessionID, ordinal: UInt64, sheet: Sheet, lastAccess: Int64, tenant: Tenant)
    /// A session's new state after an action, and the events the action appended. Only the
    /// changed scalars travel, not the `Sheet`, so the shard's next change to the session does
    /// not have to copy its event log. The ordinal (also in `deleted`) is the one it was created
    /// with: an archive that names a session's rows by it needs no map from ids of its own.
    case changed(SessionID, ordinal: UInt64, state: ArchivedState, events: [SheetEvent], lastAccess: Int64)
    case deleted(SessionID, ordinal: UInt64)
    /// A session was read: remember when, for the idle sweep after a restart.
    case touched(SessionID, ordinal: UInt64, lastAccess: Int64)
    case keyStored(ArchivedKey)
    /// Dropped from a ledger because it was full; the stored row goes too.
    case keyDropped(scope: SessionID?, key: String)
    /// Keys first used before this instant (milliseconds since 1970) are past their lifetime.
    case keysExpired(before: Int64)
}

/// What of a `Sheet` an action can change; the configuration and creation time never change.
public struct ArchivedState: Sendable, Hashable {
    public var phase: Phase
    public var detent: Detent
    public var presentation: Int
    public var dismissReason: DismissReason?
    public var version: UInt64
    /// The rest of the state, or nil when all of it has the values a sheet starts with (most
    /// sessions: their rows then store nothing for it).
    public var extras: LaterState?

    public init(_ sheet: Sheet) {
        phase = sheet.phase
        detent = sheet.detent
        presentation = sheet.presentation
        dismissReason = sheet.dismissReason
        version = sheet.version
        extras = LaterState.stored(of: sheet)
    }
}

/// An idempotency key and the first answer given for it.
public struct ArchivedKey: Sendable, Hashable {
    /// The session the key was used on; nil for `POST /sessions` (global scope).
    public var scope: SessionID?
    public var key: String
    /// The two halves of the request's fingerprint (method, path and body hashed).
    public var fingerprintValue: UInt64
    public var fingerprintCheck: UInt64
    public var answer: StoredAnswer
    public var storedAt: Timestamp

    public init(scope: SessionID?, key: String, fingerprintValue: UInt64, fingerprintCheck: UInt64,
                answer: StoredAnswer, storedAt: Timestamp) {
        self.scope = scope
        self.key = key
        self.fingerprintValue = fingerprintValue
        self.fingerprintCheck = fingerprintCheck
        self.answer = answer
        self.storedAt = storedAt
    }

    init(scope: SessionID?, request: IdempotencyRequest, answer: StoredAnswer, storedAt: Timestamp) {
        self.init(scope: scope, key: request.key, fingerprintValue: request.fingerprint.value,
                  fingerprintCheck: request.fingerprint.check, answer: answer, storedAt: storedAt)
    }

    var ledgerKey: IdempotencyLedger.Key { IdempotencyLedger.Key(scope: scope, key: key) }
    var fingerprint: IdempotencyLedger.Fingerprint {
        IdempotencyLedger.Fingerprint(value: fingerprintValue, check: fingerprintCheck)
    }
}

/// A stored session as start-up reads it back.
public struct RestoredSession: Sendable {
    public var id: SessionID
    public var ordinal: UInt64
    public var sheet: Sheet
    public var lastAccess: Int64
    public var tenant: Tenant

    public init(id: SessionID, ordinal: UInt64, sheet: Sheet, lastAccess: Int64, tenant: Tenant) {
        self.id = id
        self.ordinal = ordinal
        self.sheet = sheet
        self.lastAccess = lastAccess
        self.tenant = tenant
    }
}

/// Everything an archive holds.
public struct ArchiveContents: Sendable {
    public var sessions: [RestoredSession]
    /// Oldest first, so the ledgers forget the oldest first again.
    public var keys: [ArchivedKey]
    /// The largest ordinal ever given, deleted sessions included, so list cursors handed out
    /// before a restart never see a new session slip in behind them.
    public var highestOrdinal: UInt64

    public init(sessions: [RestoredSession] = [], keys: [ArchivedKey] = [], highestOrdinal: UInt64 = 0) {
        self.sessions = sessions
        self.keys = keys
        self.highestOrdinal = highestOrdinal
    }
}

/// Why an archive could not be opened, read or written. The message is meant for an operator;
/// the code says what kind of trouble it is, for a program to act on.
public struct ArchiveError: Error, Sendable, CustomStringConvertible {
    /// A struct around the package's enum, so a client compares codes and a new one never breaks
    /// its `switch`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        package enum Base: String, Sendable {
            /// The storage cannot be opened, locked, created or reached.
            case unavailable
            /// The storage holds something that is not this archive, or a newer format of it.
            case incompatible
            /// What is stored cannot be read back as sessions.
            case damaged
            /// The archive was closed; it takes no more changes.
            case closed
        }

        package let base: Base
        package init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        public static let unavailable = Code(.unavailable)
        public static let incompatible = Code(.incompatible)
        public static let damaged = Code(.damaged)
        public static let closed = Code(.closed)
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// An error whose kind is not known more closely than "the storage failed".
    public init(_ message: String) {
        self.init(.unavailable, message)
    }

    public var description: String { message }
}

/// Completes when a group of submitted changes is committed, or fails when it never will be (a
/// submit after `close`); any number of tasks may wait on it, and any number of callbacks follow
/// it (`whenDone`, for answers given without a task). One object serves every change of a group
/// commit, so waiting costs no allocation per request.
public final class ArchiveCommit: Sendable {
    private enum Outcome: UInt8 {
        case pending, committed, failed
    }

    private struct State {
        var failure: ArchiveError?
        var waiters: [UnsafeContinuation<ArchiveError?, Never>] = []
        var followers: [Follower] = []
    }

    /// A `whenDone` callback. Wrapped in a struct: an array of bare closures holds them at the
    /// most general calling convention, so each one added was boxed in a reabstraction thunk,
    /// allocated on the request's thread and freed on the writer's.
    private struct Follower {
        let body: @Sendable (_ committed: Bool) -> Void
    }

    private let state: LockedValue<State>
    /// The outcome, read without the lock on the fast path (a commit already done, or the
    /// volatile archive); set once, after `state`, with releasing order.
    private let outcome = Atomic<UInt8>(Outcome.pending.rawValue)

    /// A commit expecting about `followers` callbacks: room for them is made once, instead of
    /// the list growing by doubling as a group's requests arrive, each step a fresh block (and,
    /// past a kilobyte, one glibc serves from its slower bins).
    public init(expectedFollowers followers: Int = 0) {
        var state = State()
        state.followers.reserveCapacity(followers)
        self.state = LockedValue(state)
    }

    /// A commit that is already complete: what an archive that keeps nothing returns.
    public static let immediate: ArchiveCommit = {
        let commit = ArchiveCommit()
        commit.complete()
        return commit
    }()

    /// A commit that has failed already: what an archive returns for changes it cannot take.
    public static func failed(_ error: ArchiveError) -> ArchiveCommit {
        let commit = ArchiveCommit()
        commit.fail(error)
        return commit
    }

    public var isCommitted: Bool { outcome.load(ordering: .acquiring) == Outcome.committed.rawValue }

    /// True once the commit has failed. An archive fails a commit when it takes the changes (it
    /// has closed), never later: `SQLiteArchive` stores what it took before it closes.
    public var hasFailed: Bool { outcome.load(ordering: .acquiring) == Outcome.failed.rawValue }

    /// Returns once the commit is complete; throws if it failed. Unsafe continuations: each is
    /// resumed exactly once, by `complete`/`fail` or right here when the outcome was known
    /// before it could be parked.
    public func wait() async throws(ArchiveError) {
        if isCommitted { return }
        let failure = await withUnsafeContinuation { (continuation: UnsafeContinuation<ArchiveError?, Never>) in
            let known = state.withLock { state -> ArchiveError?? in
                switch Outcome(rawValue: outcome.load(ordering: .acquiring)) {
                case .committed?: return .some(nil)
                case .failed?: return .some(state.failure)
                case .pending?, nil:
                    state.waiters.append(continuation)
                    return nil
                }
            }
            if let known { continuation.resume(returning: known) }
        }
        if let failure { throw failure }
    }

    /// Calls `body` once the commit is complete (true) or has failed (false): right here when
    /// that is known already, else on the thread that completes it (the archive's writer), after
    /// the waiting tasks are resumed and in the order the callbacks were added. `body` must not
    /// block: later commits wait for it.
    public func whenDone(_ body: @escaping @Sendable (_ committed: Bool) -> Void) {
        if isCommitted { return body(true) }
        let known = state.withLock { state -> Bool? in
            switch Outcome(rawValue: outcome.load(ordering: .acquiring)) {
            case .committed?: return true
            case .failed?: return false
            case .pending?, nil:
                state.followers.append(Follower(body: body))
                return nil
            }
        }
        if let known { body(known) }
    }

    /// Marks the commit complete and resumes everyone waiting. Called once, by the archive.
    public func complete() {
        finish(.committed, failure: nil)
    }

    /// Marks the commit failed: every waiter, now or later, gets `error`. Called once, by the archive.
    public func fail(_ error: ArchiveError) {
        finish(.failed, failure: error)
    }

    private func finish(_ result: Outcome, failure: ArchiveError?) {
        let (waiters, followers) = state.withLock { state in
            precondition(outcome.load(ordering: .relaxed) == Outcome.pending.rawValue, "an ArchiveCommit finished twice")
            state.failure = failure
            outcome.store(result.rawValue, ordering: .releasing)
            defer {
                state.waiters = []
                state.followers = []
            }
            return (state.waiters, state.followers)
        }
        for waiter in waiters { waiter.resume(returning: failure) }
        for follower in followers { follower.body(result == .committed) }
    }
}

/// The archive of `--memory`: keeps nothing, so every commit is complete at once and sessions
/// live exactly as long as the process.
public final class VolatileArchive: SessionArchive {
    public init() {}
    public func load() throws(ArchiveError) -> ArchiveContents { ArchiveContents() }
    public func submit(_ changes: [ArchiveChange]) -> ArchiveCommit { .immediate }
    public func close() {}
    public var keepsChanges: Bool { false }
}
