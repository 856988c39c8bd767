import Glibc

/// A value guarded by a pthread mutex, for state that plain threads (the archive's writer) and
/// tasks share.
///
/// Used instead of `Synchronization.Mutex` on purpose, as HTTPServer's `LockedState` is: on Linux
/// ThreadSanitizer cannot see the happens-before edges of `Mutex` (its contended path is a raw
/// futex in an uninstrumented library), so every contended `Mutex` is reported as a data race
/// and `swift test --sanitize=thread` (.ci/sanitizers) says nothing useful. A pthread mutex is
/// intercepted by TSan and costs the same uncontended. `package`: SQLiteArchive uses it too.
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
