import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// Tools for tests that must tell exactly what the wire carried: a complete answer, a connection
// closed before any byte of an answer, or (the failure these tests exist to catch) an answer cut
// short or malformed.

/// What one request on a raw connection came to.
enum WireOutcome: Sendable {
    /// One complete, well-formed answer.
    case answered(WireAnswer)
    /// Refused, reset or closed before a single byte of an answer arrived.
    case closedBeforeAnswer
    /// Some bytes of an answer arrived, then the connection ended.
    case truncated(String)
    /// Bytes arrived that are not a well-formed HTTP/1.1 answer.
    case malformed(String)
    /// Nothing conclusive within the receive timeout.
    case timedOut
}

/// An answer parsed strictly (see `StrictHTTP.parse`).
struct WireAnswer: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var closesConnection: Bool { header("Connection")?.lowercased().contains("close") ?? false }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
}

/// A strict HTTP/1.1 answer parser: exact status line, token header names, one Content-Length
/// (or valid chunked framing), and a body of exactly that length.
enum StrictHTTP {
    enum Result {
        case complete(WireAnswer, consumed: Int)
        /// A valid prefix of an answer; more bytes are needed.
        case incomplete
        case malformed(String)
    }

    static func parse(_ bytes: ArraySlice<UInt8>, bodyless: Bool = false) -> Result {
        let start = bytes.startIndex
        guard let headEnd = find([13, 10, 13, 10], in: bytes) else {
            // A valid prefix must at least start like a status line.
            let prefix = Array("HTTP/1.".utf8)
            let n = min(prefix.count, bytes.count)
            if Array(bytes.prefix(n)) != Array(prefix.prefix(n)) {
                return .malformed("does not start with HTTP/1.: \(describe(bytes.prefix(40)))")
            }
            return bytes.count > 64 * 1024 ? .malformed("head longer than 64 KiB") : .incomplete
        }
        let head = bytes[start..<headEnd]
        var lines = split(head)
        let statusLine = lines.removeFirst()
        let statusText = String(decoding: statusLine, as: UTF8.self)
        let statusBytes = Array(statusLine)
        guard statusBytes.count >= 12,
              statusText.hasPrefix("HTTP/1.1 ") || statusText.hasPrefix("HTTP/1.0 "),
              statusBytes[9...11].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              statusBytes.count == 12 || statusBytes[12] == 0x20,
              statusBytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }),
              let status = Int(String(decoding: statusBytes[9...11], as: UTF8.self)), (100...599).contains(status)
        else { return .malformed("bad status line \(describe(statusLine))") }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                return .malformed("header line without a colon: \(describe(line))")
            }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { return .malformed("bad header name \(describe(name))") }
            let value = line[(colon + 1)...]
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                return .malformed("control byte in header \(describe(name))")
            }
            headers.append((String(decoding: name, as: UTF8.self),
                            String(decoding: value, as: UTF8.self).trimmingCharacters(in: .whitespaces)))
        }
        var answer = WireAnswer(status: status, headers: headers, body: [])
        let bodyStart = headEnd + 4
        let lengths = headers.filter { $0.0.lowercased() == "content-length" }.map(\.1)
        let chunked = answer.header("Transfer-Encoding")?.lowercased() == "chunked"
        if bodyless || status == 204 || status == 304 || (100...199).contains(status) {
            return .complete(answer, consumed: bodyStart - start)
        }
        if chunked {
            guard lengths.isEmpty else { return .malformed("both Content-Length and chunked") }
            var cursor = bodyStart
            while true {
                guard let lineEnd = find([13, 10], in: bytes[cursor...]) else { return .incomplete }
                let sizeText = String(decoding: bytes[cursor..<lineEnd], as: UTF8.self)
                guard let size = Int(sizeText.split(separator: ";", omittingEmptySubsequences: false)[0], radix: 16), size >= 0 else {
                    return .malformed("bad chunk size \(sizeText)")
                }
                cursor = lineEnd + 2
                if size == 0 {
                    // No trailers from this server: the final CRLF follows at once.
                    guard bytes.endIndex - cursor >= 2 else { return .incomplete }
                    guard bytes[cursor] == 13, bytes[cursor + 1] == 10 else { return .malformed("trailer after the last chunk") }
                    return .complete(answer, consumed: cursor + 2 - start)
                }
                guard bytes.endIndex - cursor >= size + 2 else { return .incomplete }
                answer.body += bytes[cursor..<(cursor + size)]
                guard bytes[cursor + size] == 13, bytes[cursor + size + 1] == 10 else { return .malformed("chunk not followed by CRLF") }
                cursor += size + 2
            }
        }
        guard lengths.count == 1, let length = Int(lengths[0]), length >= 0, lengths[0].allSatisfy(\.isASCII) else {
            return .malformed("status \(status) without exactly one valid Content-Length: \(lengths)")
        }
        guard bytes.endIndex - bodyStart >= length else { return .incomplete }
        answer.body = Array(bytes[bodyStart..<(bodyStart + length)])
        return .complete(answer, consumed: bodyStart + length - start)
    }

    /// Every answer in `bytes`, which must be a sequence of complete answers and nothing else.
    /// `libmicrohttpdDefects` counts the one known libmicrohttpd 0.9.75 fault that is tolerated
    /// (see `isDuplicatedErrorHead`); anything else malformed or cut short is a `problem`.
    static func parseAll(_ bytes: [UInt8]) -> (answers: [WireAnswer], problem: String?, libmicrohttpdDefects: Int) {
        var answers: [WireAnswer] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            if let answer = isDuplicatedErrorHead(rest) {
                answers.append(answer)
                return (answers, nil, 1)
            }
            switch parse(rest) {
            case .complete(let answer, let consumed):
                answers.append(answer)
                rest = rest.dropFirst(consumed)
            case .incomplete:
                return (answers, "truncated answer after \(answers.count) complete one(s): \(describe(rest.prefix(60)))", 0)
            case .malformed(let why):
                return (answers, "malformed answer after \(answers.count) complete one(s): \(why)", 0)
            }
        }
        return (answers, nil, 0)
    }

    /// libmicrohttpd 0.9.75 refuses some requests after it has parsed their head (a head that no
    /// longer fits the connection's memory once the body arrives; over TLS also a Content-Length
    /// it cannot parse, which sheetd answers itself otherwise) with its own 4xx error, and writes
    /// that answer's head twice before the body and the close. The bytes are exactly: head, the
    /// same head again, body, end. Only that exact shape, from libmicrohttpd (no X-Request-Id:
    /// sheetd never saw the request) and with `Connection: close`, is recognised; it is the last
    /// thing on the connection.
    static func isDuplicatedErrorHead(_ bytes: ArraySlice<UInt8>) -> WireAnswer? {
        guard let headEnd = find([13, 10, 13, 10], in: bytes) else { return nil }
        let head = bytes[bytes.startIndex..<(headEnd + 4)]
        guard bytes.count >= 2 * head.count,
              bytes[(headEnd + 4)..<(headEnd + 4 + head.count)].elementsEqual(head),
              case .complete(var answer, let consumed) = parse(bytes[(headEnd + 4)...]),
              consumed == bytes.endIndex - (headEnd + 4),
              (400...499).contains(answer.status), answer.closesConnection, answer.header("X-Request-Id") == nil
        else { return nil }
        answer.headers.append(("X-Test-Note", "libmicrohttpd duplicated this head"))
        return answer
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    static func find(_ marker: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= marker.count else { return nil }
        var index = bytes.startIndex
        let last = bytes.endIndex - marker.count
        while index <= last {
            if bytes[index] == marker[0] && bytes[index..<(index + marker.count)].elementsEqual(marker) { return index }
            index += 1
        }
        return nil
    }

    private static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var rest = head
        while let end = find([13, 10], in: rest) {
            lines.append(rest[rest.startIndex..<end])
            rest = rest[(end + 2)...]
        }
        lines.append(rest)
        return lines
    }

    static func describe(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes.prefix(80), as: UTF8.self).debugDescription
    }
}

/// One raw TCP connection to 127.0.0.1 that reports outcomes strictly.
final class WireConnection {
    let fd: Int32
    private(set) var isOpen = true
    private var pending: [UInt8] = []

    /// nil when the connection cannot be made; `errno` then says why.
    init?(port: Int, receiveTimeout: Double = 10) {
        fd = socket(AF_INET, testSocketType, 0)
        guard fd >= 0 else { return nil }
        setTimeout(SO_RCVTIMEO, seconds: receiveTimeout)
        setTimeout(SO_SNDTIMEO, seconds: receiveTimeout)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { return nil }
    }

    deinit { closeOnce(fd) }  // the one close: see `closeOnce`

    /// False when the peer is gone (EPIPE, ECONNRESET).
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    func shutdownWrite() { Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// Sends one request and reads exactly one answer, classifying the result.
    func exchange(_ request: [UInt8], bodyless: Bool = false) -> WireOutcome {
        guard isOpen else { return .closedBeforeAnswer }
        if !send(request) {
            isOpen = false
            return pending.isEmpty ? .closedBeforeAnswer : .truncated("send failed with \(pending.count) unread bytes")
        }
        return readAnswer(bodyless: bodyless)
    }

    /// Reads one answer with a new receive timeout of `seconds` (which only ends a failure).
    func readAnswer(waitingUpTo seconds: Double) -> WireOutcome {
        setTimeout(SO_RCVTIMEO, seconds: seconds)
        return readAnswer()
    }

    /// Sets SO_RCVTIMEO or SO_SNDTIMEO.
    private func setTimeout(_ option: Int32, seconds: Double) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func readAnswer(bodyless: Bool = false) -> WireOutcome {
        while true {
            if !pending.isEmpty {
                switch StrictHTTP.parse(pending[...], bodyless: bodyless) {
                case .complete(let answer, let consumed):
                    pending.removeFirst(consumed)
                    if answer.closesConnection { isOpen = false }
                    return .answered(answer)
                case .malformed(let why):
                    isOpen = false
                    return .malformed(why)
                case .incomplete:
                    break
                }
            }
            var chunk = [UInt8](repeating: 0, count: 16384)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                pending += chunk[0..<count]
                continue
            }
            let error = errno
            if count < 0 && (error == EAGAIN || error == EWOULDBLOCK) { return .timedOut }
            if count < 0 && error == EINTR { continue }
            isOpen = false
            if pending.isEmpty { return .closedBeforeAnswer }
            return .truncated("closed after \(pending.count) bytes: \(StrictHTTP.describe(pending))")
        }
    }

    /// Reads until the server closes (or the timeout); returns everything received.
    func readToEnd() -> (bytes: [UInt8], closed: Bool) {
        var all = pending
        pending = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { all += chunk[0..<count]; continue }
            if count < 0 && errno == EINTR { continue }
            let closed = count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)
            isOpen = !closed
            return (all, closed)
        }
    }
}

/// Runs `body(index)` on `count` threads of their own at once and waits for all of them.
/// Call it off the cooperative pool (inside `offPool`): it blocks.
func onThreads(_ count: Int, stackSize: Int = 1 << 20, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.stackSize = stackSize
        thread.start()
    }
    group.wait()
}

/// A value shared between threads, behind a lock (a class, so escaping closures can capture it;
/// NSLock is a pthread mutex, which ThreadSanitizer understands).
final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched inside `withLock`, with `lock` held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// A start line for threads that must act at the same moment.
final class StartLine: Sendable {
    private let waiting: Atomic<Int>
    init(_ count: Int) { waiting = Atomic(count) }

    /// Blocks (spinning briefly) until every party has arrived.
    func arriveAndWait() {
        waiting.subtract(1, ordering: .acquiringAndReleasing)
        while waiting.load(ordering: .acquiring) > 0 { sched_yield() }
    }
}

func milliseconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
}
