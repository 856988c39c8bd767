@testable import HTTPServer
import Glibc
import Testing

/// `ConnectionTracker.shutAll`, on socket pairs standing for connections: what it shuts is seen
/// by the peer as the end of the stream (a read returning 0).
@Suite("Shutting every connection at shutdown")
struct ConnectionTrackerTests {
    @Test("every open connection is shut, and so is one opened afterwards; a closed one is not touched")
    func shutAll() throws {
        let tracker = ConnectionTracker(timeout: .seconds(5))
        let open = try SocketPair(), closed = try SocketPair(), later = try SocketPair()
        let openState = ConnectionState(fd: open.server, clientAddress: "", now: 0)
        let closedState = ConnectionState(fd: closed.server, clientAddress: "", now: 0)
        tracker.opened(openState)
        tracker.opened(closedState)
        tracker.closed(closedState)

        tracker.shutAll()
        #expect(open.peerSeesEnd())
        #expect(!closed.peerSeesEnd(), "a closed connection's descriptor may be another's: left alone")

        tracker.opened(ConnectionState(fd: later.server, clientAddress: "", now: 0))
        #expect(later.peerSeesEnd(), "a connection opened while the server stops is shut as it opens")
    }
}

/// A connected pair of stream sockets: `server` stands for a connection's descriptor, `peer`
/// for its client. Closed when released.
private final class SocketPair {
    let server: Int32
    let peer: Int32

    init() throws {
        var ends: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        server = ends[0]
        peer = ends[1]
    }

    deinit {
        close(server)
        close(peer)
    }

    /// True when the peer reads the end of the stream; false when nothing is there to read (the
    /// read does not wait: the server's side never writes).
    func peerSeesEnd() -> Bool {
        var byte: UInt8 = 0
        return recv(peer, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }
}
