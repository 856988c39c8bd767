/// Polls `condition` every `interval` until it holds: true then, false once `bound` has passed.
/// The bound only ends a failing test; a passing one never waits for it, so no test depends on
/// how fast the machine is. One copy for every test target that waits for another thread.
public func eventually(within bound: Duration = .seconds(30), every interval: Duration = .milliseconds(1),
                       _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + bound
    while await !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: interval)
    }
    return true
}
