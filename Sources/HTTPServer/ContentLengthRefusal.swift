import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The answer to a Content-Length libmicrohttpd 0.9.75 cannot parse (`-1`, `+15`, `0xf`, `15x`)
// or that overflows, given by the server instead of the library's.
//
// libmicrohttpd checks Content-Length when the head is complete (`parse_connection_headers`),
// before the first access-handler call, and refuses it there (`transmit_error_response`): it
// queues its HTML answer, builds its head into the write buffer and moves the connection on to
// sending. But its state machine then overwrites that state with HEADERS_PROCESSED, runs on to
// START_REPLY and builds the head a second time, after the first: the client reads the status
// line and headers twice, the second as the first answer's body. The access handler is never
// called. No option or flag avoids that path, and no callback sees the head before it.
//
// What the server does see is the library's log line, written on the connection's own thread
// just before the refusal, while that connection is at HEADERS_RECEIVED with no answer yet. The
// refused connection is found without doubt: it is one of this thread's connections whose
// request line was logged (URI-log callback) and whose first access-handler call has not come
// (`ConnectionState.headPending`), and it is the only one of those whose head is parsed and that
// has no answer queued (connections still reading their head have none parsed; the library
// moves a parsed head on to the access handler in the same pass, or has queued its own answer).
// With anything but exactly one such connection nothing is done and the library answers.
//
// The server then writes its own JSON answer with `Connection: close` to the socket and shuts
// down the socket's sending side, all within the log call: libmicrohttpd is inside this very
// call on this thread and has not written a byte for the request, and it writes nothing before
// the call returns. Its own answer then fails to send, as when a client leaves before reading,
// and it closes the connection; the socket lingers so the client's body is read, not reset.
// Under TLS the server cannot write beside the library's TLS session: the library answers.

/// The refusal a libmicrohttpd log line announces for a request's Content-Length, if any.
func contentLengthRefusal(inLogLine line: String, maxBodySize: Int) -> HTTPRejection? {
    if line.hasPrefix("Failed to parse `Content-Length' header.") {
        return .invalidHeader(name: "Content-Length", problem: .invalidValue)
    }
    if line.hasPrefix("Too large value of 'Content-Length' header.") {
        return .payloadTooLarge(limit: maxBodySize)
    }
    return nil
}

extension ServerCore {
    /// Called with each libmicrohttpd log line, on the thread that logs it: answers a
    /// Content-Length refusal in the library's place (see above).
    func answerContentLengthRefusal(logLine line: String) {
        guard configuration.tls == nil,
              let rejection = contentLengthRefusal(inLogLine: line, maxBodySize: limits.maxBodySize) else { return }
        let refused = connections.pendingHeads(onThread: sheetd_thread_id()).filter { state in
            guard let connection = state.connection else { return false }
            return sheetd_head_parsed(connection) != 0 && sheetd_answer_queued(connection) == 0
        }
        guard refused.count == 1, let state = refused.first, let connection = state.connection else {
            errorLog("a refused Content-Length could not be matched to one connection: libmicrohttpd answers it")
            return
        }
        state.headPending = false
        let target = RequestTarget(raw: state.rawTarget ?? "/")
        state.rawTarget = nil
        // The library keeps no method the server can read at this point.
        let head = HTTPRequestHead(
            method: HTTPMethod(rawValue: ""), path: target.path, query: target.query,
            headers: collectHeaders(connection).headers,
            clientAddress: state.clientAddress)
        var response = responder.rejection(rejection, head: head)
        response.headers.replace("Connection", "close")
        let (bytes, bodyCount) = serialize(response)
        state.lingerOnClose()
        state.closed.withLock { closed in
            // NOTIFY_CONNECTION CLOSED has not run (it sets `closed` under this lock), so the
            // descriptor is still this connection's.
            guard !closed else { return }
            bytes.withUnsafeBytes { raw in _ = sheetd_send_then_shut(state.fd, raw.baseAddress, raw.count) }
        }
        responder.completed(HTTPExchangeRecord(
            head: head, status: response.status, bytesIn: 0, bytesOut: bodyCount, elapsedNanoseconds: 0,
            completedNormally: true, responseHeaders: response.headers))
    }

    /// A complete HTTP/1.1 answer with a body of known length, as libmicrohttpd would write it,
    /// and the length of its body.
    private func serialize(_ response: HTTPResponse) -> (bytes: [UInt8], bodyCount: Int) {
        let body: [UInt8]
        if case .bytes(let bytes) = response.body { body = bytes } else { body = [] }
        let reason = String(cString: MHD_get_reason_phrase_for(UInt32(response.status)))
        var head = "HTTP/1.1 \(response.status) \(reason)\r\nDate: \(httpDate())\r\n"
        for (name, value) in response.headers where !name.asciiCaseInsensitiveEquals("Content-Length") {
            head += "\(name): \(value)\r\n"
        }
        head += "Content-Length: \(body.count)\r\n\r\n"
        return (Array(head.utf8) + body, body.count)
    }

    private func httpDate() -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer -> String in
            guard let base = buffer.baseAddress, sheetd_http_date(base, 64) > 0 else { return "" }
            return String(cString: base)
        }
    }
}
