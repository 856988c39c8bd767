#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a pthread mutex: the one lock type of the HTTP layer and the store
/// (both share state between plain threads and tasks).
///
/// Used instead of `Synchronization.Mutex`, deliberately: on Linux, ThreadSanitizer does not see
/// the happens-before edges of `Mutex`'s contended path (it lives in the uninstrumented
/// Synchronization library and ends in raw futex calls), so every contended `Mutex` shows up as
/// a false data race, checked on this machine with a 4-thread counter. A pthread mutex is
/// intercepted by TSan, costs the same uncontended, and keeps `swift test --sanitize=thread`
/// meaningful. Atomics (`Synchronization.Atomic`) are inlined builtins and stay.
// @unchecked Sendable: `value` is only ever touched inside `withLock`, with `mutex` held.
package final class LockedValue<Value: Sendable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    @inline(__always)
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
