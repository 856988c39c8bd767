@testable import HTTPServer
import Testing

@Suite("Request state machine (no sockets)")
struct RequestStateMachineTests {
    static let limits = RequestStateMachine.Limits(maxBodySize: 100, maxHeaderCount: 5, maxDiscardedBytes: 1000)

    @Test("a request with a body: proceed, append, respond, then queue the answer after the resume")
    func happyPath() {
        var machine = RequestStateMachine(limits: Self.limits)
        #expect(machine.headReceived(headerCount: 3, contentLength: 60, shuttingDown: false) == .proceed)
        #expect(machine.bodyChunk(count: 30) == .append)
        #expect(machine.bodyChunk(count: 30) == .append)
        #expect(machine.requestComplete() == .respond)
        #expect(machine.isAwaitingAnswer)
        #expect(machine.requestComplete() == .queueAnswer)
        #expect(machine.state == .answered)
    }

    @Test("answered in place: the final call queues the responder's answer without suspending")
    func answeredInPlace() {
        var machine = RequestStateMachine(limits: Self.limits)
        #expect(machine.headReceived(headerCount: 3, contentLength: 10, shuttingDown: false) == .proceed)
        #expect(machine.bodyChunk(count: 10) == .append)
        #expect(machine.requestComplete() == .respond)
        machine.answeredInPlace()
        #expect(machine.state == .answered)
        #expect(machine.requestComplete() == .abort)

        var early = RequestStateMachine(limits: Self.limits)
        early.answeredInPlace()
        #expect(early.state == .failed)
    }

    @Test("head refusals", arguments: [
        (6, Int?.none, false, RequestStateMachine.HeadAction.reject(.tooManyHeaders(limit: 5))),
        (5, 101, false, .reject(.payloadTooLarge(limit: 100))),
        (5, 100, false, .proceed),
        (0, nil, false, .proceed),
        (1, 10, true, .reject(.serviceUnavailable)),
        (1, Int.max, false, .reject(.payloadTooLarge(limit: 100))),
    ])
    func headRefusals(headers: Int, contentLength: Int?, stopping: Bool, expected: RequestStateMachine.HeadAction) {
        var machine = RequestStateMachine(limits: Self.limits)
        #expect(machine.headReceived(headerCount: headers, contentLength: contentLength, shuttingDown: stopping) == expected)
        if expected != .proceed { #expect(machine.state == .answered) }
    }

    @Test("an ambiguous body length is refused; shutting down still answers 503 first")
    func ambiguousLength() {
        var machine = RequestStateMachine(limits: Self.limits)
        #expect(machine.headReceived(headerCount: 3, contentLength: 10, ambiguousLength: true, shuttingDown: false) == .reject(.ambiguousLength))
        #expect(machine.state == .answered)
        var stopping = RequestStateMachine(limits: Self.limits)
        #expect(stopping.headReceived(headerCount: 3, contentLength: 10, ambiguousLength: true, shuttingDown: true) == .reject(.serviceUnavailable))
    }

    @Test("a chunked body past the limit is drained, then refused; far past it the connection is closed")
    func chunkedOverLimit() {
        var machine = RequestStateMachine(limits: Self.limits)
        #expect(machine.headReceived(headerCount: 1, contentLength: nil, shuttingDown: false) == .proceed)
        #expect(machine.bodyChunk(count: 100) == .append)
        #expect(machine.bodyChunk(count: 1) == .discard)
        #expect(machine.bodyChunk(count: 500) == .discard)
        #expect(machine.requestComplete() == .reject(.payloadTooLarge(limit: 100)))

        var flood = RequestStateMachine(limits: Self.limits)
        _ = flood.headReceived(headerCount: 1, contentLength: nil, shuttingDown: false)
        #expect(flood.bodyChunk(count: 600) == .discard)
        #expect(flood.bodyChunk(count: 600) == .abort)
    }

    @Test("calls libmicrohttpd should not make close the connection")
    func unexpectedCalls() {
        var machine = RequestStateMachine(limits: Self.limits)
        #expect(machine.requestComplete() == .abort)
        var answered = RequestStateMachine(limits: Self.limits)
        _ = answered.headReceived(headerCount: 1, contentLength: nil, shuttingDown: false)
        #expect(answered.requestComplete() == .respond)
        #expect(answered.bodyChunk(count: 1) == .abort)
    }
}

@Suite("Headers, content length, helpers")
struct HelperTests {
    @Test("HTTPHeaders: case-insensitive, ordered, replace removes every value")
    func headers() {
        var headers = HTTPHeaders([("Content-Type", "a"), ("X-Multi", "1")])
        headers.add("x-multi", "2")
        #expect(headers["content-type"] == "a")
        #expect(headers["X-MULTI"] == "1")
        #expect(headers.values(for: "X-Multi") == ["1", "2"])
        #expect(headers.count == 3)
        headers.replace("X-Multi", "3")
        #expect(headers.values(for: "x-multi") == ["3"])
        #expect(headers["missing"] == nil)
        #expect(headers.map(\.name) == ["Content-Type", "X-Multi"])
        #expect(!"abc".asciiCaseInsensitiveEquals("abcd"))
        #expect("ÄbC".asciiCaseInsensitiveEquals("Äbc"))
    }

    @Test("Content-Length parsing", arguments: [
        ("0", 0), ("42", 42), (" 7 ", 7), ("99999999999999999999999", Int.max),
    ])
    func contentLength(text: String, value: Int) {
        #expect(parseContentLength(text.utf8) == value)
    }

    @Test("malformed Content-Length", arguments: ["", "-1", "1a", "0x10"])
    func badContentLength(text: String) {
        #expect(parseContentLength(text.utf8) == nil)
    }

    @Test("the framing fields are counted as the fields are collected, names in any case", arguments: [
        ([("Host", "x"), ("Content-Length", "12")], FramingFields(hostFields: 1, contentLengthFields: 1, contentLength: 12)),
        ([("HOST", "x"), ("host", "y")], FramingFields(hostFields: 2)),
        ([("content-LENGTH", "3"), ("Content-Length", "4")], FramingFields(contentLengthFields: 2, contentLength: 3)),
        ([("Content-Length", "5"), ("transfer-encoding", "chunked")],
         FramingFields(contentLengthFields: 1, transferEncodingFields: 1, contentLength: 5)),
        ([("Transfer-Encoding", "chunked")], FramingFields(transferEncodingFields: 1)),
        ([("Content-Length", "1a")], FramingFields(contentLengthFields: 1)),
        // Names of the same lengths that are not these: none counts.
        ([("Xost", "x"), ("Content-Lengtx", "1"), ("Transfer-Encodinx", "gzip"), ("Hos", "x")], FramingFields()),
    ])
    func framing(fields: [(String, String)], expected: FramingFields) {
        var framing = FramingFields()
        for (name, value) in fields {
            Array(name.utf8).withUnsafeBytes { name in
                Array(value.utf8).withUnsafeBytes { value in framing.note(name: name, value: value) }
            }
        }
        #expect(framing == expected)
    }

    @Test("where the body ends is ambiguous with two Content-Lengths, or one beside Transfer-Encoding", arguments: [
        (FramingFields(), false),
        (FramingFields(contentLengthFields: 1), false),
        (FramingFields(transferEncodingFields: 1), false),
        (FramingFields(contentLengthFields: 2), true),
        (FramingFields(contentLengthFields: 1, transferEncodingFields: 1), true),
    ])
    func ambiguousLength(framing: FramingFields, ambiguous: Bool) {
        #expect(framing.ambiguousLength == ambiguous)
    }

    /// The byte-at-a-time rules the word-at-a-time checks must agree with.
    static func referenceIsToken(_ bytes: [UInt8]) -> Bool { !bytes.contains { $0 <= 0x20 || $0 == 0x7F } }
    static func referenceIsFieldValue(_ bytes: [UInt8]) -> Bool { !bytes.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F } }

    @Test("field names and values are checked word by word as byte by byte: every byte at every place", arguments: 0...20)
    func fieldBytesEveryPlace(count: Int) {
        for base: UInt8 in [UInt8(ascii: "a"), 0x80] {
            let clean = [UInt8](repeating: base, count: count)
            #expect(clean.withUnsafeBytes(isToken))
            #expect(clean.withUnsafeBytes(isFieldValue))
            for place in 0..<count {
                for byte in UInt8.min...UInt8.max {
                    var bytes = clean
                    bytes[place] = byte
                    // The checks are handed exactly `count` bytes; a read past the array's
                    // allocation is the sanitizers' to catch.
                    #expect(bytes.withUnsafeBytes(isToken) == Self.referenceIsToken(bytes), "token \(bytes)")
                    #expect(bytes.withUnsafeBytes(isFieldValue) == Self.referenceIsFieldValue(bytes), "value \(bytes)")
                }
            }
        }
    }

    @Test("two special bytes in one field (tabs, controls, high bytes): word by word agrees with byte by byte", arguments: [3, 4, 7, 8, 9, 15, 16, 17])
    func fieldBytesPairs(count: Int) {
        let special: [UInt8] = [0x09, 0x00, 0x1F, 0x20, 0x7F, 0x80, 0xFF]
        for first in 0..<count {
            for second in first..<count {
                for a in special {
                    for b in special {
                        var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: count)
                        bytes[first] = a
                        bytes[second] = b
                        #expect(bytes.withUnsafeBytes(isToken) == Self.referenceIsToken(bytes), "token \(bytes)")
                        #expect(bytes.withUnsafeBytes(isFieldValue) == Self.referenceIsFieldValue(bytes), "value \(bytes)")
                    }
                }
            }
        }
    }

    @Test("a method read from libmicrohttpd's C string keeps its spelling", arguments: ["POST", "GET", "DELETE", "HEAD", "PROPFIND", "get", "POSTX", ""])
    func methodFromCString(spelling: String) {
        #expect(spelling.withCString(HTTPMethod.init(cString:)) == HTTPMethod(rawValue: spelling))
    }

    @Test("query lookup and default rejections")
    func requestHead() {
        let head = HTTPRequestHead(method: .get, path: "/x", query: [("a", "1"), ("a", "2"), ("b", "")])
        #expect(head.queryValue("a") == "1")
        #expect(head.queryValue("b") == "")
        #expect(head.queryValue("c") == nil)
        #expect(HTTPResponse.defaultRejection(.payloadTooLarge(limit: 1)).status == 413)
        #expect(HTTPResponse.defaultRejection(.tooManyHeaders(limit: 1)).status == 431)
        #expect(HTTPResponse.defaultRejection(.serviceUnavailable).status == 503)
    }

    @Test("timeouts round up to whole seconds; sweep interval is bounded")
    func durations() {
        #expect(wholeSecondsRoundedUp(.milliseconds(1)) == 1)
        #expect(wholeSecondsRoundedUp(.seconds(30)) == 30)
        #expect(wholeSecondsRoundedUp(.milliseconds(1500)) == 2)
        #expect(wholeSecondsRoundedUp(.zero) == 1)
        #expect(HTTPServer.sweepInterval(deadline: .seconds(60), connectionTimeout: .seconds(30), lingerTime: .seconds(30)) == .seconds(1))
        #expect(HTTPServer.sweepInterval(deadline: .milliseconds(100), connectionTimeout: .seconds(30), lingerTime: .seconds(5)) == .milliseconds(10))
        #expect(HTTPServer.sweepInterval(deadline: .seconds(60), connectionTimeout: .seconds(1), lingerTime: .seconds(5)) == .milliseconds(100))
        #expect(HTTPServer.sweepInterval(deadline: .seconds(60), connectionTimeout: .seconds(30), lingerTime: .seconds(2)) == .milliseconds(200))
    }

    /// libmicrohttpd splits its limit among the workers; each worker's share must hold every
    /// connection the accept loop admits plus a closed one not yet uncounted, or the worker can
    /// fail its firm check and (in 0.9.75) keep its cleanup mutex locked.
    @Test("libmicrohttpd's limit leaves every worker room for all admitted connections", arguments: [
        (10_000, 2), (3, 1), (8, 2), (1, 64), (1_000_000, 4), (1_000_000, 1_000), (1_000_000, 10_000),
    ])
    func daemonConnectionLimit(maxConnections: Int, threads: Int) {
        let limit = HTTPServer.daemonConnectionLimit(maxConnections: maxConnections, threads: threads)
        #expect(limit <= Int(UInt32.max), "it is passed as an unsigned int")
        if limit < Int(UInt32.max) {
            #expect(limit / threads >= maxConnections + 1)
        } else {
            #expect((maxConnections + threads).multipliedReportingOverflow(by: threads).partialValue >= Int(UInt32.max))
        }
    }
}

@Suite("HTTPHeaders' storage")
struct HTTPHeadersStorageTests {
    @Test("remove keeps the other fields in order, in a copy too", arguments: [
        ([("A", "1"), ("B", "2"), ("a", "3"), ("C", "4")], "a", [("B", "2"), ("C", "4")]),
        ([("A", "1")], "A", []),
        ([("A", "1"), ("B", "2")], "b", [("A", "1")]),
        ([("A", "1"), ("B", "2")], "missing", [("A", "1"), ("B", "2")]),
        ([("Cache-Control", "no-store"), ("ETag", "\"2\""), ("Cache-Control", "x")], "cache-control", [("ETag", "\"2\"")]),
    ])
    func remove(fields: [(String, String)], name: String, kept: [(String, String)]) {
        let original = HTTPHeaders(fields)
        var headers = original
        headers.remove(name)
        #expect(headers.map { "\($0.name)=\($0.value)" } == kept.map { "\($0.0)=\($0.1)" })
        #expect(headers.count == kept.count)
        #expect(original.count == fields.count, "the list it was copied from is untouched")
        #expect(original.map { "\($0.name)=\($0.value)" } == fields.map { "\($0.0)=\($0.1)" })
        headers.add("Z", "9")
        #expect(headers["z"] == "9")
        #expect(headers.count == kept.count + 1)
    }

    @Test("a copy of a template holds its fields and grows apart from it", arguments: [
        [],
        [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
        [("A", ""), ("b", "2"), ("A", "3")],
    ])
    func copying(fields: [(String, String)]) {
        let template = HTTPHeaders(fields)
        for extra in [0, 1, 144] {
            var copy = HTTPHeaders(copying: template, reservingBytes: extra)
            #expect(copy.map { "\($0.name)=\($0.value)" } == fields.map { "\($0.0)=\($0.1)" })
            copy.add("X-Request-Id", String(repeating: "r", count: 200))
            copy.add("ETag", "\"7\"")
            #expect(copy.count == fields.count + 2)
            #expect(copy["x-request-id"]?.utf8.count == 200)
            #expect(copy["etag"] == "\"7\"")
            #expect(template.count == fields.count, "the template is untouched")
            #expect(template["X-Request-Id"] == nil)
            #expect(template.map { "\($0.name)=\($0.value)" } == fields.map { "\($0.0)=\($0.1)" })
        }
    }

    @Test("long and empty names and values survive the buffer's growth")
    func growth() {
        var headers = HTTPHeaders()
        for index in 0..<200 {
            headers.add("X-Field-\(index)", String(repeating: "v", count: index))
        }
        headers.add("", "")
        #expect(headers.count == 201)
        #expect(headers["x-field-199"] == String(repeating: "v", count: 199))
        #expect(headers["X-FIELD-0"] == "")
        #expect(headers.values(for: "") == [""])
        #expect(headers.count(of: "x-field-7") == 1)
    }
}

@Suite("libmicrohttpd's log lines: faults, or a client that left")
struct LibraryLogLineTests {
    @Test("a client leaving mid-exchange is not a fault", arguments: [
        "Socket has been disconnected when reading request.",
        "Connection was closed by remote side with incomplete request.",
        "Closing connection (application error generating response).\n",
        "Failed to send the response headers for the request for `/sessions/x/events'. Error: The connection was forcibly closed by remote peer",
        "Failed to send the chunked response body for the request for `/s'. Error: The socket is no longer available for sending",
        "Connection socket is closed when reading request due to the error: detected connection closure",
        "Connection socket is closed when reading request due to the error: The connection was forcibly closed by remote peer",
    ])
    func departures(line: String) {
        #expect(LibraryLogLine.isClientDeparture(line))
    }

    @Test("everything else stays an error", arguments: [
        "Closing connection (out of memory).",
        "Application reported internal error, closing connection.",
        "Failed to send the response body for the request for `/s'. Error: Not enough system resources to serve the request",
        "Failed to send data in request for /s.",
        "Connection socket is closed when reading request due to the error: Bad FD value",
        "Failed to remove FD from epoll set.",
        "Error processing request (HTTP response code is 413 ('Content Too Large')). Closing connection.",
        "Socket has been disconnected when reading request. and more",
        "",
    ])
    func faults(line: String) {
        #expect(!LibraryLogLine.isClientDeparture(line))
    }
}
