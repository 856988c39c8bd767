import Timekeeping

extension SessionStore {
    /// The pause between two idle sweeps: a tenth of the TTL, at least 100 ms, at most a minute,
    /// so a session is removed at most 10 % after its TTL and a short TTL is not swept in a spin.
    public var idleSweepInterval: Duration {
        min(max(configuration.sessionTTL / 10, .milliseconds(100)), .seconds(60))
    }

    /// Sweeps idle sessions every `idleSweepInterval` on the store's timer clock until the task
    /// is cancelled; a pass in progress finishes first.
    public func runIdleSweeps() async {
        let clock = configuration.timerClock
        let interval = idleSweepInterval
        while true {
            do { try await clock.sleep(until: clock.now + interval) } catch { return }
            await sweepIdleSessions()
        }
    }
}
