#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Ports on 127.0.0.1 for test servers that must not share their port with anything else in the
/// run: a PostgreSQL server that binds its port seconds after it is chosen (after initdb) and
/// again on each restart, and HTTP servers whose tests connect to the port after shutdown to
/// see it refused.
///
/// They lie below the kernel's ephemeral range (`ip_local_port_range`). The kernel hands out
/// ports of that range to every outgoing connection and every bind of port 0, which the tests make
/// by the thousand: a port chosen from it can be taken before its server binds it ("Address
/// already in use"), and a port a stopped server freed can be given to another test's server,
/// which then answers the requests meant to be refused. Below the range only an explicit bind
/// takes a port. The picks of one test process are different ports (a counter from a random
/// start), and each is checked free by binding it.
enum LoopbackPorts {
    static func unshared() throws -> Int {
        let ephemeralStart = ephemeralRange()?.lowerBound ?? 32_768
        let span = min(16_384, ephemeralStart - 1_024)   // ports [ephemeralStart - span, ephemeralStart)
        guard span >= 256 else {
            throw LoopbackPortError(description: "the ephemeral range starts at \(ephemeralStart): no room below it")
        }
        picks.lock()
        defer { picks.unlock() }
        for _ in 0..<span {
            let offset = nextOffset ?? Int.random(in: 0..<span)
            nextOffset = (offset + 1) % span
            let port = ephemeralStart - span + offset
            if isBindable(port) { return port }
        }
        throw LoopbackPortError(description: "no free port below \(ephemeralStart)")
    }

    /// The kernel's range of ephemeral ports, from /proc (nil where it cannot be read).
    static func ephemeralRange() -> ClosedRange<Int>? {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return nil }
        return bounds[0]...bounds[1]
    }

    private static let picks = NSLock()
    // nonisolated(unsafe): only read or written while holding `picks`.
    nonisolated(unsafe) private static var nextOffset: Int?

    /// Whether a socket on 127.0.0.1 can bind `port` now (without SO_REUSEADDR, so a port that a
    /// listener or a connection in TIME_WAIT still holds is not).
    private static func isBindable(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

struct LoopbackPortError: Error, CustomStringConvertible {
    let description: String
}
