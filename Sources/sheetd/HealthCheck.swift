import CGnuTLS
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sheetd --check URL`: a tiny HTTP GET so a container's HEALTHCHECK needs no curl in the image.
enum HealthCheck {
    /// Exit status: 0 when the URL answers 200 within two seconds, 1 otherwise. An https:// URL,
    /// or an http:// one while this environment configures TLS (`--tls-cert`, as the container's
    /// `SHEETD_TLS_CERT` does: the server then speaks only TLS on its port), is fetched over TLS.
    /// The certificate is not verified: this checks that this very process is alive on a local
    /// address, where the certificate's name (a public one) would not match anyway.
    static func run(_ url: String, tls serverUsesTLS: Bool) -> Int32 {
        let useTLS: Bool
        let rest: Substring
        if url.hasPrefix("https://") {
            useTLS = true
            rest = url.dropFirst("https://".count)
        } else if url.hasPrefix("http://") {
            useTLS = serverUsesTLS
            rest = url.dropFirst("http://".count)
        } else {
            printError("--check needs an http:// or https:// URL, not \"\(url)\"")
            return 1
        }
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count)
        var host = String(authority)
        var port = useTLS && url.hasPrefix("https://") ? "443" : "80"
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
        let request = Array("GET \(path.isEmpty ? "/" : String(path)) HTTP/1.1\r\nHost: \(authority)\r\nConnection: close\r\n\r\n".utf8)
        let answer = useTLS ? exchangeOverTLS(fd, request) : exchangePlain(fd, request)
        guard let answer, answer.count > 12 else { return 1 }
        let statusLine = String(decoding: answer, as: UTF8.self)
        return statusLine.hasPrefix("HTTP/1.1 200") || statusLine.hasPrefix("HTTP/1.0 200") ? 0 : 1
    }

    /// Sends the request and returns the first bytes of the answer.
    private static func exchangePlain(_ fd: Int32, _ request: [UInt8]) -> [UInt8]? {
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return count > 0 ? Array(buffer[0..<count]) : nil
    }

    /// The same through a GnuTLS client session on the connected socket.
    private static func exchangeOverTLS(_ fd: Int32, _ request: [UInt8]) -> [UInt8]? {
        var session: gnutls_session_t?
        guard gnutls_init(&session, UInt32(GNUTLS_CLIENT)) == GNUTLS_E_SUCCESS, let session else { return nil }
        defer { gnutls_deinit(session) }
        var credentials: gnutls_certificate_credentials_t?
        guard gnutls_certificate_allocate_credentials(&credentials) == GNUTLS_E_SUCCESS, let credentials else { return nil }
        defer { gnutls_certificate_free_credentials(credentials) }
        guard gnutls_set_default_priority(session) == GNUTLS_E_SUCCESS,
              gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials)) == GNUTLS_E_SUCCESS
        else { return nil }
        gnutls_transport_set_int2(session, fd, fd)
        gnutls_handshake_set_timeout(session, 2000)
        var result: Int32
        repeat { result = gnutls_handshake(session) } while result < 0 && gnutls_error_is_fatal(result) == 0
        guard result == GNUTLS_E_SUCCESS else {
            printError("TLS handshake failed: \(String(cString: gnutls_strerror(result)))")
            return nil
        }
        var sent: Int
        repeat {
            sent = request.withUnsafeBytes { gnutls_record_send(session, $0.baseAddress, $0.count) }
        } while sent < 0 && sheetd_gnutls_is_retryable(Int32(sent)) != 0
        guard sent == request.count else { return nil }
        var buffer = [UInt8](repeating: 0, count: 64)
        var count: Int
        repeat {
            count = buffer.withUnsafeMutableBytes { gnutls_record_recv(session, $0.baseAddress, $0.count) }
        } while count < 0 && sheetd_gnutls_is_retryable(Int32(count)) != 0
        return count > 0 ? Array(buffer[0..<count]) : nil
    }
}

func printError(_ message: String) {
    var line = "sheetd: " + message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
