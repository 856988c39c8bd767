#if canImport(Glibc)
import Glibc
#endif

/// Tries `attempt` every `interval` until it gives a value: that value, or nil once `bound` has
/// passed. The bound only ends a failing test; a passing one never waits for it, so no test
/// depends on how fast the machine is. One copy for every test target that waits for another
/// thread (a shard still busy, a callback not run yet).
public func retried<Value>(within bound: Duration = .seconds(30), every interval: Duration = .milliseconds(1),
                           _ attempt: () async throws -> Value?) async rethrows -> Value? {
    let deadline = ContinuousClock.now + bound
    while true {
        if let value = try await attempt() { return value }
        guard ContinuousClock.now < deadline else { return nil }
        try? await Task.sleep(for: interval)
    }
}

/// Polls `condition` (as `retried` does) until it holds: true then, false once `bound` has passed.
public func eventually(within bound: Duration = .seconds(30), every interval: Duration = .milliseconds(1),
                       _ condition: () async -> Bool) async -> Bool {
    await retried(within: bound, every: interval) { await condition() ? true : nil } ?? false
}

/// `retried` for a test body that blocks its own thread (one run off the cooperative pool, where
/// nothing is awaited): tries `attempt` every `interval` until it gives a value: that value, or
/// nil once `bound` has passed.
public func retriedBlocking<Value>(within bound: Duration = .seconds(30), every interval: Duration = .milliseconds(1),
                                   _ attempt: () throws -> Value?) rethrows -> Value? {
    let deadline = ContinuousClock.now + bound
    let pause = useconds_t(interval.components.seconds * 1_000_000 + interval.components.attoseconds / 1_000_000_000_000)
    while true {
        if let value = try attempt() { return value }
        guard ContinuousClock.now < deadline else { return nil }
        usleep(pause)
    }
}

/// `eventually` for a blocking test body: polls `condition` (as `retriedBlocking` does) until it
/// holds: true then, false once `bound` has passed.
public func eventuallyBlocking(within bound: Duration = .seconds(30), every interval: Duration = .milliseconds(1),
                               _ condition: () throws -> Bool) rethrows -> Bool {
    try retriedBlocking(within: bound, every: interval) { try condition() ? true : nil } ?? false
}
