import Glibc

/// `sheetd --check URL`: a tiny HTTP GET so a container's HEALTHCHECK needs no curl in the image.
enum HealthCheck {
    /// Exit status: 0 when the URL answers 200 within two seconds, 1 otherwise.
    static func run(_ url: String) -> Int32 {
        guard url.hasPrefix("http://") else {
            printError("--check needs an http:// URL, not \"\(url)\"")
            return 1
        }
        let rest = url.dropFirst("http://".count)
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count)
        var host = String(authority)
        var port = "80"
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { port = String(after.dropFirst()) }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = String(authority[authority.index(after: colon)...])
        }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, port, &hints, &results) == 0, let first = results else {
            printError("cannot resolve \(host):\(port)")
            return 1
        }
        defer { freeaddrinfo(results) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return 1 }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            printError("cannot connect to \(host):\(port)")
            return 1
        }
        let request = "GET \(path.isEmpty ? "/" : String(path)) HTTP/1.1\r\nHost: \(authority)\r\nConnection: close\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 12 else { return 1 }
        let statusLine = String(decoding: buffer[0..<count], as: UTF8.self)
        return statusLine.hasPrefix("HTTP/1.1 200") || statusLine.hasPrefix("HTTP/1.0 200") ? 0 : 1
    }
}

func printError(_ message: String) {
    var line = "sheetd: " + message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
