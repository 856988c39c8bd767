@testable import HTTPServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Requests a normal client cannot send, over raw sockets: what libmicrohttpd 0.9.75 lets
/// through and the server must refuse or read exactly (RFC 9112 §3.2, §3.2.2, §5.1; RFC 9110 §5.5).
@Suite("HTTP at its edges", .serialized)
struct EdgeTests {
    @Test("whitespace before a colon: 400, connection closed, the body never runs as a request",
          arguments: ["Content-Length : 40", "Content-Length\t: 40", "Transfer-Encoding : chunked", "X-Custom : v"])
    func whitespaceBeforeColon(field: String) async throws {
        try await withServer { _, port, probe in
            let smuggled = "GET /echo?smuggled=1 HTTP/1.1\r\nHost: x\r\n\r\n"
            let (response, closed) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                try client.send("POST /echo HTTP/1.1\r\nHost: x\r\n\(field)\r\n\r\n" + smuggled)
                let response = try client.readResponse()
                return (response, client.waitForClose())
            }
            #expect(response.status == 400)
            #expect(response.header("Connection")?.lowercased() == "close")
            #expect(closed, "nothing after the refused request is read as a request")
            #expect(probe.respondCalls == 0)
            #expect(await probe.wait { $0.records.count == 1 })
            #expect(!probe.records.contains { $0.head.queryValue("smuggled") != nil })
        }
    }

    @Test("a control character in a field value or name: 400, wherever it stands; a tab is fine", arguments: [
        ("X-Custom: a\u{0}b\r\n", 400), ("X-Custom: a\u{1}b\r\n", 400), ("X-Custom: a\u{7F}b\r\n", 400),
        ("X-Custom: \u{0}\r\n", 400), ("X-Custom: a\u{0}\u{0}b\r\n", 400), ("X-Custom: a\u{0}\r\n", 400),
        ("X-Custom: a\u{0}b\r\nX-Other: c\r\n", 400), ("X-Custom: a\u{0}\r\nX-Other: c\r\n", 400),
        ("X-Cus\u{0}tom: a\r\n", 400), ("X-Custom: a\u{0}b\n", 400),
        ("X-Custom: a\tb\r\n", 200), ("X-Custom: é\r\n", 200), ("X-Custom: v\nX-Other: c\n", 200), ("X-Custom:\r\n", 200),
    ])
    func controlCharacterInField(fields: String, status: Int) async throws {
        try await withServer { _, port, probe in
            let (first, last) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                // The field first (before Host), then last: libmicrohttpd lays them out differently.
                try client.send(Array("GET /echo HTTP/1.1\r\n\(fields)Host: x\r\n\r\n".utf8))
                let first = try client.readResponse()
                let again = try RawHTTPClient(port: port, receiveTimeout: 5)
                try again.send(Array("GET /echo HTTP/1.1\r\nHost: x\r\n\(fields)\r\n".utf8))
                return (first, try again.readResponse())
            }
            #expect(first.status == status)
            #expect(last.status == status)
            #expect(probe.respondCalls == (status == 200 ? 2 : 0))
        }
    }

    @Test("Host: HTTP/1.1 needs exactly one; HTTP/1.0 may leave it out",
          arguments: [("HTTP/1.1", "", 400), ("HTTP/1.1", "Host: a\r\nHost: b\r\n", 400), ("HTTP/1.1", "Host: a\r\n", 200),
                      ("HTTP/1.0", "", 200)])
    func host(version: String, hosts: String, status: Int) async throws {
        try await withServer { _, port, probe in
            let response = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                try client.send("GET /echo \(version)\r\n\(hosts)\r\n")
                return try client.readResponse()
            }
            #expect(response.status == status)
            #expect(probe.respondCalls == (status == 200 ? 1 : 0))
        }
    }

    @Test("an absolute-form target is served like its origin form")
    func absoluteForm() async throws {
        try await withServer { _, port, _ in
            let (absolute, bare) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                try client.send("GET http://example.com:8080/ec%68o?a=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n")
                let absolute = try client.readResponse()
                try client.send("GET HTTPS://example.com?b=2 HTTP/1.1\r\nHost: example.com\r\n\r\n")
                return (absolute, try client.readResponse())
            }
            #expect(absolute.status == 200)
            #expect(absolute.header("X-Path") == "/echo")
            #expect(absolute.header("X-Query") == "a=1")
            #expect(bare.status == 404, "the path of http://host?q is /")
        }
    }

    @Test("an escaped slash or NUL in the path stays escaped: it neither splits nor ends a segment")
    func escapedSeparators() async throws {
        try await withServer { _, port, probe in
            let (slash, nul) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                return (try client.roundTrip("GET", "/echo%2Fx"), try client.roundTrip("GET", "/echo%00x"))
            }
            #expect(slash.status == 404)
            #expect(nul.status == 404)
            #expect(await probe.wait { $0.records.count == 2 })
            #expect(probe.records.map(\.head.path) == ["/echo%2Fx", "/echo%00x"])
        }
    }

    @Test("the raw target is decoded exactly", arguments: [
        ("/ec%68o", "/echo", [(String, String)]()),
        ("/a%2fb%2Fc", "/a%2fb%2Fc", []),
        ("/a%00b", "/a%00b", []),
        ("/a%2541", "/a%2541", []),
        ("/a%zz%4", "/a%zz%4", []),
        ("/caf%C3%A9", "/café", []),
        ("/x?a=%00b&c=d+e&&flag&=v&k=1=2", "/x", [("a", "\u{0}b"), ("c", "d e"), ("flag", ""), ("", "v"), ("k", "1=2")]),
        ("/x?p=%2F%26", "/x", [("p", "/&")]),
        ("http://h/x?q=1", "/x", [("q", "1")]),
        ("HTTP://h:1", "/", []),
        ("https://h?q", "/", [("q", "")]),
        ("*", "*", []),
        ("", "/", []),
        // Bare paths (no "%", no "?") are taken as they stand.
        ("/", "/", []),
        ("/sessions/abc/drag", "/sessions/abc/drag", []),
        ("/a+b/c;d", "/a+b/c;d", []),
        ("/café", "/café", []),
        ("/x?", "/x", []),
    ])
    func targets(raw: String, path: String, query: [(String, String)]) {
        #expect(RequestTarget(raw: raw) == RequestTarget(path: path, query: query))
    }

    @Test("an early answer is readable by a client that sends its whole body first (lingering close)")
    func lingeringClose() async throws {
        try await withServer({ $0.maxBodySize = 1000 }) { server, port, probe in
            let (response, closed) = try await onThread {
                // A small send buffer and a body far larger than any socket buffer: the client's
                // send can only finish if the server reads (and drops) the body after its answer.
                let client = try RawHTTPClient(port: port, receiveTimeout: 10)
                var small: Int32 = 64 * 1024
                setsockopt(client.fd, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
                let body = [UInt8](repeating: UInt8(ascii: "x"), count: 12 << 20)
                try client.send(Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
                let response = try client.readResponse()
                return (response, client.waitForClose())
            }
            #expect(response.status == 413)
            #expect(closed)
            #expect(probe.respondCalls == 0)
            #expect(await probe.wait { _ in server.openConnections == 0 })
        }
    }

    @Test("lingering ends at its byte bound: the socket closes while the client still sends")
    func lingeringBound() async throws {
        try await withServer({ $0.maxBodySize = 1000; $0.lingerBytes = 1 << 20 }) { _, port, _ in
            let failedToSend = try await onThread { () -> Bool in
                let client = try RawHTTPClient(port: port, receiveTimeout: 10)
                let body = [UInt8](repeating: UInt8(ascii: "x"), count: 64 << 20)
                do {
                    try client.send(Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
                    return false
                } catch {
                    return true
                }
            }
            #expect(failedToSend, "64 MiB cannot all be taken when lingering stops after 1 MiB")
        }
    }

    @Test("a Content-Length libmicrohttpd cannot parse gets the responder's one answer, never a doubled head", arguments: [
        ("-1", 400), ("+15", 400), ("0xf", 400), ("15x", 400), ("1 2", 400), ("99999999999999999999999", 413),
    ])
    func unparsableContentLength(value: String, status: Int) async throws {
        try await withServer { _, port, probe in
            let (response, after) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                try client.send("POST /echo?q=1 HTTP/1.1\r\nHost: x\r\nX-Tag: t1\r\nContent-Length: \(value)\r\n\r\n{}")
                return (try client.readResponse(), client.readToEnd())
            }
            #expect(response.status == status)
            #expect(response.header("Content-Type") == "text/plain; charset=utf-8", "the responder's rejection, not libmicrohttpd's HTML")
            #expect(response.header("Connection")?.lowercased() == "close")
            #expect(after == [], "one answer, then the end: \(String(decoding: after ?? [], as: UTF8.self))")
            #expect(probe.respondCalls == 0)
            #expect(await probe.wait { $0.records.count == 1 })
            let record = try #require(probe.records.first)
            #expect(record.status == status)
            #expect(record.head.path == "/echo" && record.head.queryValue("q") == "1")
            #expect(record.head.headers["X-Tag"] == "t1")
        }
    }

    @Test("a refused Content-Length among many connections reading their heads, and between requests on keep-alive ones")
    func unparsableContentLengthAmongOthers() async throws {
        try await withServer({ $0.threads = 1 }) { _, port, probe in
            let (before, refused, after, others) = try await onThread {
                // Heads half sent on other connections of the same (single) libmicrohttpd thread.
                let waiting = try (0..<8).map { _ in try RawHTTPClient(port: port, receiveTimeout: 5) }
                for client in waiting { try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n") }
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
                let before = try client.readResponse().status
                // The bad head in two parts, the request line first (read apart or together:
                // the outcome is the same).
                try client.send("POST /echo HTTP/1.1\r\nHost: x\r\n")
                usleep(50_000)
                try client.send("Content-Length: -1\r\n\r\n")
                let refused = try client.readResponse().status
                let after = client.readToEnd()
                var others: [Int] = []
                for other in waiting {
                    try other.send("\r\n")
                    others.append(try other.readResponse().status)
                }
                return (before, refused, after, others)
            }
            #expect(before == 200)
            #expect(refused == 400)
            #expect(after == [], "one answer, then the end")
            #expect(others == Array(repeating: 200, count: 8), "the other heads are untouched")
            #expect(probe.respondCalls == 9)
        }
    }

    @Test("what libmicrohttpd still refuses by itself is refused with its status, never reaches the responder, and the connection closes", arguments: [
        ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n", 400),
        ("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", 413),
        ("POST /echo HTTP/1.1\r\nHost: x\r\nX-Huge: \(String(repeating: "h", count: 20_000))\r\n\r\n", 431),
        ("GET /echo?\(String(repeating: "q", count: 20_000)) HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("GET /echo HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ])
    func libraryRefusals(request: String, status: Int) async throws {
        try await withServer({ $0.connectionMemoryLimit = 16 * 1024 }) { _, port, probe in
            let (response, closed) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                try client.send(request)
                return (try client.readResponse(), client.waitForClose())
            }
            // libmicrohttpd 0.9.75 answers these itself (a documented exception): its status and
            // its HTML; the responder never runs.
            #expect(response.status == status)
            #expect(closed)
            #expect(probe.respondCalls == 0)
        }
    }

    @Test("streams whose clients close free their connections without waiting for a write")
    func closedStreamsFreeTheirSlots() async throws {
        try await withServer { server, port, probe in
            let count = 20
            try await onThread {
                var clients: [RawHTTPClient] = []
                for index in 0..<count {
                    let client = try RawHTTPClient(port: port, receiveTimeout: 5)
                    try client.send("GET /idle-stream?id=s\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
                    guard let head = try client.readHead(), head.status == 200 else { throw ClientError("no stream") }
                    _ = try client.readChunk()
                    clients.append(client)
                }
                clients.removeAll() // closes every socket (FIN)
            }
            // /idle-stream never writes again: only watching the sockets can notice.
            #expect(await probe.wait(for: .seconds(10)) { $0.streamsClosed.count == count })
            #expect(await probe.wait(for: .seconds(10)) { _ in server.openConnections == 0 })
        }
    }
}
