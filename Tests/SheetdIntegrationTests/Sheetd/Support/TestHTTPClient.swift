import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An answer as the wire carried it.
struct TestResponse: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object (Foundation, independent of sheetd's own JSON code).
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])) as? [String: Any] ?? [:]
    }

    var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
    var errorField: String? { (json["error"] as? [String: Any])?["field"] as? String }
}

/// The one close of a test client's socket, from its `deinit`. `deinit` also runs when `init`
/// fails after the socket was set (Swift deinitializes a class whose init fails once all its
/// properties are set), so the failure paths must not close it themselves: a second close would
/// hit whatever the process opened with that number meanwhile (another test's socket, a
/// server's listener, Dispatch's own descriptors). Keeps errno: callers read it after a failed init.
func closeOnce(_ fd: Int32) {
    let saved = errno
    if fd >= 0 { close(fd) }
    errno = saved
}

/// The socket type of every test client: close-on-exec. The tests run in one process that
/// also spawns sheetd servers, and Foundation's `Process` on Linux closes in the child only the
/// descriptors up to the highest one open when it scans `/proc/self/fd`, before `posix_spawn`.
/// A client socket another thread opened in between lives on in that server: closing it sends
/// no FIN, and the server under test never sees the connection end (the likely cause of one CI
/// failure of `connectionsPerClientAreCapped`).
let testSocketType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)

struct TestClientError: Error, CustomStringConvertible {
    let description: String
}

/// A small blocking HTTP/1.1 client over one keep-alive TCP connection, written against POSIX
/// sockets so tests see exactly the bytes on the wire (status, headers, chunking, closes).
final class TestHTTPClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, host: String = "127.0.0.1", receiveTimeout: Double = 10, receiveBuffer: Int? = nil) throws {
        fd = socket(AF_INET, testSocketType, 0)
        guard fd >= 0 else { throw TestClientError(description: "socket failed") }
        var seconds = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            throw TestClientError(description: "connect to \(port) failed: errno \(errno)")
        }
    }

    deinit { closeOnce(fd) }  // the one close: see `closeOnce`

    func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw TestClientError(description: "send failed: errno \(errno)") }
            offset += sent
        }
    }

    func request(_ method: String, _ path: String, body: String? = nil, headers: [(String, String)] = []) throws -> TestResponse {
        try request(method, path, bodyBytes: body.map { Array($0.utf8) }, headers: headers)
    }

    func request(_ method: String, _ path: String, bodyBytes: [UInt8]?, headers: [(String, String)] = []) throws -> TestResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let bodyBytes { head += "Content-Length: \(bodyBytes.count)\r\n" }
        head += "\r\n"
        try sendRaw(Array(head.utf8) + (bodyBytes ?? []))
        return try readResponse(method: method)
    }

    /// Reads one answer: status line, headers, then a Content-Length or chunked body.
    func readResponse(method: String = "GET") throws -> TestResponse {
        var response = try readResponseHead()
        let status = response.status
        if method == "HEAD" || status == 204 || status == 304 { return response }
        if let length = response.header("Content-Length").flatMap(Int.init) {
            try fill(length)
            response.body = Array(buffer[0..<length])
            buffer.removeFirst(length)
        } else if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            while true {
                let lineEnd = try readUntil([13, 10])
                let sizeText = String(decoding: buffer[0..<lineEnd], as: UTF8.self).split(separator: ";")[0]
                buffer.removeFirst(lineEnd + 2)
                guard let size = Int(sizeText, radix: 16) else { throw TestClientError(description: "bad chunk size") }
                try fill(size + 2)
                response.body += buffer[0..<size]
                buffer.removeFirst(size + 2)
                if size == 0 { break }
            }
        }
        return response
    }

    /// Half-closes nothing: drops the connection as a client that went away would.
    func shutdownConnection() {
        Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Reads the status line and headers only (for streams, whose body never ends on its own).
    func readResponseHead() throws -> TestResponse {
        let headEnd = try readUntil([13, 10, 13, 10])
        let headText = String(decoding: buffer[0..<headEnd], as: UTF8.self)
        buffer.removeFirst(headEnd + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw TestClientError(description: "bad status line \(statusLine)") }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return TestResponse(status: status, headers: headers, body: [])
    }

    /// For streams: reads whatever arrives next (at least one byte), or nil when the server closed.
    func readAvailable() throws -> [UInt8]? {
        if !buffer.isEmpty {
            defer { buffer.removeAll() }
            return buffer
        }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count == 0 { return nil }
        guard count > 0 else { throw TestClientError(description: "recv failed: errno \(errno)") }
        return Array(chunk[0..<count])
    }

    /// True when the server has closed the connection (reads EOF within the timeout).
    func serverClosed() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                let end = buffer.count - marker.count
                if searchFrom <= end {
                    for index in searchFrom...end where buffer[index] == marker[0] && Array(buffer[index..<(index + marker.count)]) == marker {
                        return index
                    }
                    searchFrom = end + 1
                }
            }
            try receiveMore()
        }
    }

    private func fill(_ count: Int) throws {
        while buffer.count < count { try receiveMore() }
    }

    private func receiveMore() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count == 0 { throw TestClientError(description: "connection closed by server") }
        guard count > 0 else { throw TestClientError(description: "recv failed: errno \(errno)") }
        buffer += chunk[0..<count]
    }
}
