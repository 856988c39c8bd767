import Dispatch
import Foundation
import SheetCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The instance's one `LISTEN` connection, on a thread of its own that sleeps in `poll` on the
/// connection's socket (no polling loop: it wakes when PostgreSQL sends something, or when the
/// store stops it through a pipe). Each notification pokes the named sessions' presenters here.
///
/// It is also the store's watch on the database: while it cannot connect, the health says why;
/// it reconnects by itself, waiting a little longer after each failed attempt, and once back it
/// pokes every presenter, since notifications sent meanwhile never reach it.
// @unchecked Sendable: `connection` and `backoff` are only used by the listener's own thread;
// the pipe's descriptors are fixed at `init` and written once by `stop`.
final class Listener: @unchecked Sendable {
    /// The health slot of the listener; committers use slots 0 and up.
    static let healthSlot = -1

    private let context: StoreContext
    private let stopPipe: (read: Int32, write: Int32)
    private let finished = DispatchSemaphore(value: 0)
    private var connection: PostgresConnection?
    private var backoff = Committer.initialBackoff

    init(context: StoreContext) {
        self.context = context
        var descriptors: [Int32] = [-1, -1]
        _ = pipe(&descriptors)
        stopPipe = (descriptors[0], descriptors[1])
        let thread = Thread { [self] in run() }
        thread.name = "sheetd-pg-listen"
        thread.start()
    }

    func stop() {
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
        finished.wait()
        close(stopPipe.read)
        close(stopPipe.write)
    }

    private func run() {
        defer {
            connection = nil
            finished.signal()
        }
        while true {
            if connection == nil {
                do {
                    let opened = try PostgresConnection(context.url, applicationName: "sheetd-listen")
                    try opened.execute("LISTEN \(Notification.channel)")
                    connection = opened
                    backoff = Committer.initialBackoff
                    context.health.restoredAll()
                    context.presenters.pokeAll()
                } catch {
                    context.health.lost(Self.healthSlot, "PostgreSQL cannot be reached: \(error.message)")
                    if waitForStop(milliseconds: Int32(backoff.components.seconds * 1000 + backoff.components.attoseconds / 1_000_000_000_000_000)) { return }
                    backoff = min(backoff * 2, Committer.maximumBackoff)
                    continue
                }
            }
            guard let connection else { continue }
            var descriptors = [
                pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 { if errno == EINTR { continue } else { return } }
            if descriptors[1].revents != 0 { return }
            var lost = descriptors[0].revents & Int16(POLLHUP | POLLERR) != 0
            do {
                let ids = try connection.notifications().flatMap(Notification.sessions(in:))
                if !ids.isEmpty { context.presenters.changed(ids) }
            } catch {
                lost = true
            }
            if lost || !connection.isConnected {
                self.connection = nil
                context.health.lost(Self.healthSlot, "the connection to PostgreSQL was lost")
            }
        }
    }

    /// Sleeps up to `milliseconds`; true when the store asked the listener to stop meanwhile.
    private func waitForStop(milliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, milliseconds) > 0
    }
}
