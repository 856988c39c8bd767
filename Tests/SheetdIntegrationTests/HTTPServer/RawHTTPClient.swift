#if canImport(Glibc)
import Glibc
#endif
@testable import HTTPServer
import Synchronization

struct ClientError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A parsed HTTP/1.1 response.
struct RawResponse: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A tiny blocking HTTP/1.1 client on POSIX sockets, for tests. Not thread-safe: one thread uses
/// one client. Run it through `onThread` so blocking I/O never occupies Swift's cooperative pool.
final class RawHTTPClient {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0

    init(port: Int, receiveTimeout: Double = 10, receiveBuffer: Int32? = nil) throws {
        // Close-on-exec: the same test process spawns sheetd servers (SheetAPITests), and one
        // that inherited this socket would keep the connection open after the client closed it.
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ClientError("socket: \(errno)") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw ClientError("connect: \(errno)") }
        var timeout = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    // The one close of `fd`. It also runs when `init` fails after `fd` was set (Swift
    // deinitializes a class whose init fails once all its properties are set), so the failure
    // paths must not close it themselves: a second close would hit whatever the process opened
    // with that number meanwhile (another test's socket, a server's listener, Dispatch's own
    // descriptors). Keeps errno: callers read it after a failed init.
    deinit {
        let saved = errno
        if fd >= 0 { Glibc.close(fd) }
        errno = saved
    }

    /// Closes with RST (SO_LINGER 0): the server sees the client go at once.
    func abort() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Without waiting: false once the server closed or reset the connection.
    func isOpen() -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if n > 0 { return true }
        if n == 0 { return false }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
    }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw ClientError("send: errno \(errno)")
            }
            sent += n
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    static func request(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    func roundTrip(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) throws -> RawResponse {
        try send(Self.request(method, path, headers: headers, body: body))
        return try readResponse(method: method)
    }

    /// Reads more bytes; false at end of stream.
    private func fill() throws -> Bool {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                buffer.append(contentsOf: chunk[0..<n])
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw ClientError("receive timeout") }
            if errno == ECONNRESET { return false }
            throw ClientError("recv: errno \(errno)")
        }
    }

    private func readLine() throws -> String? {
        while true {
            if let index = buffer[start...].firstIndex(of: 0x0A) {
                var end = index
                if end > start && buffer[end - 1] == 0x0D { end -= 1 }
                let line = String(decoding: buffer[start..<end], as: UTF8.self)
                start = index + 1
                return line
            }
            if try !fill() { return nil }
        }
    }

    private func readBytes(_ count: Int) throws -> [UInt8] {
        while buffer.count - start < count {
            if try !fill() { throw ClientError("connection closed in the body") }
        }
        let bytes = Array(buffer[start..<start + count])
        start += count
        return bytes
    }

    /// Reads the status line and headers. Nil when the connection closed before any byte.
    func readHead() throws -> (status: Int, headers: [(String, String)])? {
        guard let statusLine = try readLine() else { return nil }
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw ClientError("bad status line: \(statusLine)")
        }
        var headers: [(String, String)] = []
        while true {
            guard let line = try readLine() else { throw ClientError("connection closed in the head") }
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw ClientError("bad header: \(line)") }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " ")
            headers.append((name, value))
        }
        return (status, headers)
    }

    /// Next chunk of a chunked body; nil after the last one.
    func readChunk() throws -> [UInt8]? {
        guard let sizeLine = try readLine() else { throw ClientError("connection closed in a chunk") }
        let hex = sizeLine.split(separator: ";").first.map(String.init) ?? ""
        guard let size = Int(hex.trimmingCharacters(in: " "), radix: 16) else {
            throw ClientError("bad chunk size: \(sizeLine)")
        }
        if size == 0 {
            while let line = try readLine(), !line.isEmpty {}
            return nil
        }
        let data = try readBytes(size)
        _ = try readLine()
        return data
    }

    func readResponse(method: String = "GET") throws -> RawResponse {
        guard let (status, headers) = try readHead() else { throw ClientError("connection closed before an answer") }
        var response = RawResponse(status: status, headers: headers, body: [])
        if method == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status) {
            return response
        }
        if response.header("Transfer-Encoding")?.lowercased().contains("chunked") == true {
            while let chunk = try readChunk() { response.body += chunk }
        } else if let length = response.header("Content-Length").flatMap({ Int($0) }) {
            response.body = try readBytes(length)
        } else {
            while try fill() {}
            response.body = Array(buffer[start...])
            start = buffer.count
        }
        return response
    }

    /// Everything the server still sends until it closes (nil if it does not close within the
    /// receive timeout): what follows a complete answer on a connection that must end.
    func readToEnd() -> [UInt8]? {
        do {
            while try fill() {}
        } catch {
            return nil
        }
        defer { start = buffer.count }
        return Array(buffer[start...])
    }

    /// True when the server closed the connection (reads EOF / reset) within the receive timeout.
    func waitForClose() -> Bool {
        do {
            while try fill() {}
            return true
        } catch {
            return false
        }
    }
}

extension String {
    func trimmingCharacters(in set: Character) -> String {
        var s = Substring(self)
        while s.first == set { s = s.dropFirst() }
        while s.last == set { s = s.dropLast() }
        return String(s)
    }
}

extension Substring {
    func trimmingCharacters(in set: Character) -> String { String(self).trimmingCharacters(in: set) }
}

/// Runs blocking work on a fresh POSIX thread (never on Swift's cooperative pool, which the
/// server's responders need) and returns its result: the server's own `runOnPlainThread`.
func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    let outcome = Locked<Result<T, any Error>?>(nil)
    await runOnPlainThread {
        let result = Result { try work() }
        outcome.withLock { $0 = result }
    }
    return try outcome.withLock { $0 }!.get()
}
