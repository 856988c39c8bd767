#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a pthread mutex: the one lock type of sheetd (the HTTP layer, the store,
/// the archive and the service share state between plain threads and tasks).
///
/// Used instead of `Synchronization.Mutex`, deliberately: on Linux, ThreadSanitizer does not see
/// the happens-before edges of `Mutex`'s contended path (it lives in the uninstrumented
/// Synchronization library and ends in raw futex calls), so every contended `Mutex` shows up as
/// a false data race, checked on this machine with a 4-thread counter. A pthread mutex is
/// intercepted by TSan, costs the same uncontended, and keeps `swift test --sanitize=thread`
/// meaningful. Atomics (`Synchronization.Atomic`) are inlined builtins and stay.
///
/// Every pthread call's result is checked: a failure (a lock taken twice by one thread, an
/// unlock by a thread that does not hold it) stops the process instead of corrupting `value`.
/// Debug builds use an error-checking mutex, which reports exactly those misuses; release
/// builds the default kind, whose fast path is a single atomic.
///
/// `value` lives behind a pointer of its own rather than in a stored property: a class's stored
/// property gets a dynamic exclusivity check on every inout access (about 80 instructions, more
/// than the uncontended lock), which the mutex makes redundant.
///
/// `Value` must have storage: a zero-sized one (`LockedValue(())`) may share its address with
/// `mutex`, and TSan then reports `withLock`'s read of `mutex` before locking as racing with the
/// other thread's inout access to `value` (seen on the checkpointer's lock).
// @unchecked Sendable: `value` is only ever touched inside `withLock`, with `mutex` held.
package final class LockedValue<Value: Sendable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Allocated in `init`, released in `deinit`.
    private let value: UnsafeMutablePointer<Value>

    package init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        #if DEBUG
        var attributes = pthread_mutexattr_t()
        Self.check(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
        Self.check(pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK)), "pthread_mutexattr_settype")
        Self.check(pthread_mutex_init(mutex, &attributes), "pthread_mutex_init")
        Self.check(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
        #else
        Self.check(pthread_mutex_init(mutex, nil), "pthread_mutex_init")
        #endif
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
    }

    deinit {
        Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    @inline(__always)
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        return try body(&value.pointee)
    }

    /// `withLock` if no one holds the lock now; nil, with `body` not run, if someone does.
    @inline(__always)
    package func withLockIfFree<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result? {
        let result = pthread_mutex_trylock(mutex)
        if result == EBUSY { return nil }
        Self.check(result, "pthread_mutex_trylock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        return try body(&value.pointee)
    }

    @inline(__always)
    private static func check(_ result: Int32, _ call: StaticString) {
        if result != 0 { failed(result, call) }
    }

    @inline(never)
    private static func failed(_ result: Int32, _ call: StaticString) -> Never {
        fatalError("\(call) failed: error \(result) (\(String(cString: strerror(result))))")
    }
}
