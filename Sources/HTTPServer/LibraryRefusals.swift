import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Answers libmicrohttpd 0.9.75 would give by itself, given as the application's own.
//
// libmicrohttpd refuses some requests after their request line without ever calling the access
// handler: a Content-Length it cannot parse (`-1`, `+15`, `0xf`, `15x`) or that overflows, a
// malformed or oversized chunk, a head that outgrows the connection's memory (431). Its answer
// is an HTML page without the application's headers, and for a bad Content-Length it even
// writes the status line and headers twice (its state machine builds the head once when it
// refuses and again when it starts the reply), so a client reads the second head as the body.
//
// The only thing the application sees at that moment is the library's log line, on the
// connection's own thread, before the library has sent a byte of its answer. The thread keeps
// the list of its connections whose request is past the request line and not yet handed to
// the application (`ThreadRequests`): every refusal above happens to one of them, so when there
// is exactly one, it is the refused one. The server then writes the application's answer for
// the refusal itself (`HTTPResponder.rejection`), with `Connection: close`, and shuts down the
// socket's sending side: libmicrohttpd's own answer fails to send and it closes the connection.
// With more than one candidate nothing is done, and the library's answer goes out as before.
// Refusals of the request line itself (414, 505, a malformed line) cannot be told apart from
// the others' and are left to the library. So is everything under TLS, where the server cannot
// write to the socket beside libmicrohttpd's TLS session.

/// The connections of one libmicrohttpd thread whose current request is past its request line
/// and not yet handed to the application. Only its own thread touches it.
final class ThreadRequests {
    struct Entry {
        let state: ConnectionState
        let connection: OpaquePointer
        let rawTarget: String
    }

    private(set) var entries: [Entry] = []

    /// This thread's list.
    static var current: ThreadRequests {
        if let raw = pthread_getspecific(threadRequestsKey) {
            return Unmanaged<ThreadRequests>.fromOpaque(raw).takeUnretainedValue()
        }
        let list = ThreadRequests()
        // Released by the key's destructor when the thread ends.
        pthread_setspecific(threadRequestsKey, Unmanaged.passRetained(list).toOpaque())
        return list
    }

    func began(_ state: ConnectionState, connection: OpaquePointer, rawTarget: String) {
        ended(state)
        entries.append(Entry(state: state, connection: connection, rawTarget: rawTarget))
    }

    func ended(_ state: ConnectionState) {
        if let index = entries.firstIndex(where: { $0.state === state }) { entries.remove(at: index) }
    }
}

/// The thread-specific key of `ThreadRequests.current`; its destructor releases the list.
private let threadRequestsKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key) { raw in
        if let raw { Unmanaged<ThreadRequests>.fromOpaque(raw).release() }
    }
    return key
}()

/// The refusal a libmicrohttpd log line reports, if it is one the server answers itself. The
/// line is libmicrohttpd's "Error processing request (HTTP response code is N ('<html>…'))".
func libraryRefusal(inLogLine line: String) -> HTTPRejection? {
    let prefix = "Error processing request (HTTP response code is "
    guard line.hasPrefix(prefix) else { return nil }
    let status = Int(line.dropFirst(prefix.count).prefix { $0.isNumber })
    switch status {
    case 400 where line.contains("value for <b>Content-Length</b>"):
        return .invalidHeader(name: "Content-Length", problem: .invalidValue)
    case 413 where line.contains("value for <b>Content-Length</b>"), 413 where line.contains("chunk size"):
        return .payloadTooLarge(limit: -1)
    case 400 where line.contains("chunked encoding"):
        return .malformedChunkedBody
    case 431:
        return .headTooLarge
    default:
        return nil
    }
}

extension ServerCore {
    /// Called with each libmicrohttpd log line, on the thread that logs it.
    func answerLibraryRefusal(logLine line: String) {
        guard configuration.tls == nil, var rejection = libraryRefusal(inLogLine: line) else { return }
        let list = ThreadRequests.current
        guard list.entries.count == 1, let entry = list.entries.first else { return }
        list.ended(entry.state)
        if case .payloadTooLarge = rejection { rejection = .payloadTooLarge(limit: limits.maxBodySize) }
        let target = RequestTarget(raw: entry.rawTarget)
        let head = HTTPRequestHead(
            method: HTTPMethod(rawValue: ""), path: target.path, query: target.query,
            headers: HTTPHeaders(storage: collectHeaders(entry.connection).pairs),
            clientAddress: entry.state.clientAddress)
        var response = responder.rejection(rejection, head: head)
        response.headers.replace("Connection", "close")
        let bytes = serialize(response)
        entry.state.lingerOnClose()
        entry.state.closed.withLock { closed in
            // NOTIFY_CONNECTION CLOSED has not run (it sets `closed` under this lock), so the
            // descriptor is still this connection's.
            guard !closed else { return }
            bytes.withUnsafeBytes { raw in _ = sheetd_send_then_shut(entry.state.fd, raw.baseAddress, raw.count) }
        }
        entry.state.currentRequest?.takeUnretainedValue().noteLibraryRefusal(status: response.status, headers: response.headers)
    }

    /// A complete HTTP/1.1 answer with a body of known length (what libmicrohttpd would write).
    private func serialize(_ response: HTTPResponse) -> [UInt8] {
        guard case .bytes(let body) = response.body else { return [] }
        var head = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
        head += "Date: \(httpDate())\r\n"
        for (name, value) in response.headers where !name.asciiCaseInsensitiveEquals("Content-Length") {
            head += "\(name): \(value)\r\n"
        }
        head += "Content-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    private func reasonPhrase(_ status: Int) -> String {
        String(cString: MHD_get_reason_phrase_for(UInt32(status)))
    }

    private func httpDate() -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer -> String in
            guard let base = buffer.baseAddress, sheetd_http_date(base, 64) > 0 else { return "" }
            return String(cString: base)
        }
    }
}
