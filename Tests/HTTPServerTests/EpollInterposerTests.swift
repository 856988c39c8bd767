import CEpollInterposer
import Dispatch
import Glibc
import Testing

/// The `epoll_wait` libmicrohttpd's loop calls (CEpollInterposer): after a full batch it must not
/// block, since the loop handles that batch only once the call returns.
@Suite("epoll_wait after a full batch")
struct EpollInterposerTests {
    @Test("the process's epoll_wait is the interposed one")
    func installed() {
        #expect(sheetd_epoll_interposer_installed() == 1)
    }

    /// `ready` socket pairs, edge-triggered, are given a byte each; the first call takes `batch` events. The
    /// second call asks to wait forever: it must return what is left at once. A watchdog event
    /// after 20 s only ends a failure (the blocking call would return that one event).
    @Test("a call after a full batch returns at once with what is left", arguments: [
        (ready: 2, batch: 2, leftAfterFirst: 0),
        (ready: 3, batch: 2, leftAfterFirst: 1),
        (ready: 4, batch: 2, leftAfterFirst: 2),
    ])
    func afterAFullBatch(ready: Int, batch: Int, leftAfterFirst: Int) throws {
        let epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        try #require(epfd >= 0)
        defer { close(epfd) }
        var pairs: [(read: Int32, write: Int32)] = []   // socket pairs, used one way
        defer { pairs.forEach { close($0.read); close($0.write) } }
        for token in 0...ready {   // the last one is the watchdog's
            var ends: [Int32] = [-1, -1]
            // Close-on-exec from the start: other tests start child processes meanwhile.
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
            pairs.append((ends[0], ends[1]))
            var event = epoll_event(events: EPOLLIN.rawValue | EPOLLET.rawValue, data: epoll_data_t(u64: UInt64(token)))
            try #require(epoll_ctl(epfd, EPOLL_CTL_ADD, ends[0], &event) == 0)
        }
        for ends in pairs.dropLast() { try #require(write(ends.write, "x", 1) == 1) }

        var events = [epoll_event](repeating: epoll_event(), count: batch)
        #expect(epoll_wait(epfd, &events, Int32(batch), -1) == Int32(batch))

        let watchdogDone = DispatchSemaphore(value: 0)
        let watchdogFD = pairs[ready].write
        DispatchQueue.global().async {
            if watchdogDone.wait(timeout: .now() + 20) == .timedOut { _ = write(watchdogFD, "x", 1) }
        }
        let second = epoll_wait(epfd, &events, Int32(batch), -1)
        watchdogDone.signal()
        #expect(second == Int32(leftAfterFirst), "the call after a full batch blocked (or lost events)")
        let tokens = events.prefix(Int(max(0, second))).map { $0.data.u64 }
        #expect(!tokens.contains(UInt64(ready)), "the watchdog's event came: the call blocked until it")
    }
}
