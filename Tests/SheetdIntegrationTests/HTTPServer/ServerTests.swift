@testable import HTTPServer
import Synchronization
import Testing
import Timekeeping

@Suite("HTTPServer over real sockets", .serialized)
struct ServerTests {
    @Test("GET and POST round trip with path, query, headers, client address")
    func roundTrip() async throws {
        try await withServer { _, port, _ in
            let (get, post) = try await onThread {
                let client = try RawHTTPClient(port: port)
                let get = try client.roundTrip("GET", "/echo?a=1&b=h%C3%A9llo&flag", headers: [("X-Custom", "v1")])
                let post = try client.roundTrip("POST", "/echo", body: Array("{\"to\":\"medium\"}".utf8))
                return (get, post)
            }
            #expect(get.status == 200)
            #expect(get.header("X-Method") == "GET")
            #expect(get.header("X-Path") == "/echo")
            #expect(get.header("X-Query") == "a=1&b=héllo&flag=")
            #expect(get.header("X-Client") == "127.0.0.1")
            #expect(get.header("X-Custom-Echo") == "v1")
            #expect(get.header("Date") != nil)
            #expect(get.body.isEmpty)
            #expect(post.status == 200)
            #expect(post.header("X-Method") == "POST")
            #expect(post.text == "{\"to\":\"medium\"}")
        }
    }

    static let bodies: [String: [UInt8]] = [
        "empty": [],
        "nul bytes": [0, 0, 0, 65, 0, 66],
        "all byte values": (0...255).map { UInt8($0) },
        "broken utf8": [0xC3, 0x28, 0xFF, 0xFE, 0x00, 0xE2, 0x82],
        "64 KiB exactly": [UInt8](repeating: 0xAB, count: 64 * 1024),
    ]

    @Test("\"::\" listens dual stack and reports IPv4 clients as IPv4")
    func dualStack() async throws {
        try await withServer({ $0.host = "::" }) { _, port, _ in
            let response = try await onThread { try RawHTTPClient(port: port).roundTrip("GET", "/echo") }
            #expect(response.status == 200)
            #expect(response.header("X-Client") == "127.0.0.1")
        }
    }

    @Test("the path is percent-decoded and separated from the query")
    func decodedPath() async throws {
        try await withServer { _, port, _ in
            let response = try await onThread { try RawHTTPClient(port: port).roundTrip("GET", "/ec%68o?x=%2F%26") }
            #expect(response.status == 200)
            #expect(response.header("X-Path") == "/echo")
            #expect(response.header("X-Query") == "x=/&")
        }
    }

    @Test("libmicrohttpd's own errors reach errorLog")
    func errorLog() async throws {
        let lines = Locked<[String]>([])
        try await withServer({ configuration in
            configuration.maxConnectionsPerClient = 1
            configuration.errorLog = { line in lines.withLock { $0.append(line) } }
        }) { _, port, _ in
            try await onThread {
                let first = try RawHTTPClient(port: port)
                _ = try first.roundTrip("GET", "/echo")
                let second = try RawHTTPClient(port: port, receiveTimeout: 1)
                _ = try? second.roundTrip("GET", "/echo")
            }
        }
        #expect(!lines.withLock { $0 }.isEmpty)
    }

    @Test("bodies come back byte for byte", arguments: ["empty", "nul bytes", "all byte values", "broken utf8", "64 KiB exactly"])
    func bodyEcho(name: String) async throws {
        let body = Self.bodies[name]!
        try await withServer { _, port, _ in
            let response = try await onThread {
                try RawHTTPClient(port: port).roundTrip("POST", "/echo", body: body)
            }
            #expect(response.status == 200)
            #expect(response.body == body)
        }
    }

    @Test("keep-alive: many requests on one connection")
    func keepAlive() async throws {
        try await withServer { server, port, probe in
            let statuses = try await onThread {
                let client = try RawHTTPClient(port: port)
                var statuses: [Int] = []
                for i in 0..<20 {
                    let method = i % 2 == 0 ? "GET" : "POST"
                    let response = try client.roundTrip(method, "/echo?i=\(i)", body: method == "POST" ? Array("body \(i)".utf8) : nil)
                    statuses.append(response.status)
                    if response.header("Connection")?.lowercased() == "close" { break }
                    if method == "POST" && response.text != "body \(i)" { statuses.append(-1) }
                }
                return statuses
            }
            #expect(statuses == Array(repeating: 200, count: 20))
            #expect(await probe.wait { $0.records.count == 20 })
            #expect(probe.records.allSatisfy { $0.completedNormally })
            _ = server
        }
    }

    @Test("pipelined requests are answered in order")
    func pipelining() async throws {
        try await withServer { _, port, _ in
            let texts = try await onThread {
                let client = try RawHTTPClient(port: port)
                var bytes: [UInt8] = []
                for i in 0..<5 { bytes += RawHTTPClient.request("POST", "/echo", body: Array("p\(i)".utf8)) }
                try client.send(bytes)
                return try (0..<5).map { _ in try client.readResponse().text }
            }
            #expect(texts == ["p0", "p1", "p2", "p3", "p4"])
        }
    }

    @Test("HEAD is answered like GET without a body")
    func head() async throws {
        try await withServer { _, port, _ in
            let (head, next) = try await onThread {
                let client = try RawHTTPClient(port: port)
                let head = try client.roundTrip("HEAD", "/slow")
                let next = try client.roundTrip("GET", "/echo")
                return (head, next)
            }
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "7")  // "slow 0\n"
            #expect(head.body.isEmpty)
            #expect(next.status == 200)
        }
    }

    @Test("preflight answers before the body and closes the connection")
    func preflight() async throws {
        try await withServer { _, port, probe in
            let (response, closed) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 3)
                // Announces a body but sends none: the answer must not wait for it.
                try client.send("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
                let response = try client.readResponse()
                return (response, client.waitForClose())
            }
            #expect(response.status == 404)
            #expect(response.header("X-Early") == "yes")
            #expect(closed)
            #expect(probe.respondCalls == 0)
        }
    }

    @Test("Content-Length twice, or with Transfer-Encoding: 400, responder not called, connection closed",
          arguments: [
              "Content-Length: 5\r\nContent-Length: 4\r\n\r\nhello",
              "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
              "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
              "transfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
          ])
    func ambiguousLength(framing: String) async throws {
        try await withServer { _, port, probe in
            let (response, closed) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 3)
                // What follows the body would be a second request to anyone framing it the other way.
                try client.send("POST /echo HTTP/1.1\r\nHost: x\r\n" + framing + "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
                let response = try client.readResponse()
                return (response, client.waitForClose())
            }
            #expect(response.status == 400)
            #expect(response.header("Connection")?.lowercased() == "close")
            #expect(closed)
            #expect(probe.respondCalls == 0)
        }
    }

    @Test("413 for a Content-Length over the limit, without reading the body")
    func contentLengthTooLarge() async throws {
        try await withServer({ $0.maxBodySize = 1000 }) { _, port, probe in
            let response = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 3)
                try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n")
                return try client.readResponse()
            }
            #expect(response.status == 413)
            #expect(response.text.contains("1000"))
            #expect(probe.respondCalls == 0)
        }
    }

    @Test("413 for a chunked body that grows past the limit")
    func chunkedTooLarge() async throws {
        try await withServer({ $0.maxBodySize = 1000 }) { _, port, probe in
            let (small, large) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 3)
                try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                try client.send("3e8\r\n" + String(repeating: "a", count: 1000) + "\r\n0\r\n\r\n")
                let small = try client.readResponse()
                try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                for _ in 0..<3 { try client.send("200\r\n" + String(repeating: "b", count: 512) + "\r\n") }
                try client.send("0\r\n\r\n")
                return (small, try client.readResponse())
            }
            #expect(small.status == 200)
            #expect(small.body.count == 1000)
            #expect(large.status == 413)
            #expect(probe.respondCalls == 1)
        }
    }

    @Test("too many headers: the responder's rejection (431)")
    func tooManyHeaders() async throws {
        try await withServer({ $0.maxHeaderCount = 10 }) { _, port, probe in
            let (ok, refused) = try await onThread {
                let okHeaders = (0..<9).map { ("X-H\($0)", "v") }  // + Host = 10
                let ok = try RawHTTPClient(port: port).roundTrip("GET", "/echo", headers: okHeaders)
                let many = (0..<10).map { ("X-H\($0)", "v") }     // + Host = 11
                let refused = try RawHTTPClient(port: port).roundTrip("GET", "/echo", headers: many)
                return (ok, refused)
            }
            #expect(ok.status == 200)
            #expect(refused.status == 431)
            #expect(probe.respondCalls == 1)
        }
    }

    @Test("a head larger than the connection memory limit is refused by libmicrohttpd")
    func headerTooLarge() async throws {
        try await withServer({ $0.connectionMemoryLimit = 4096 }) { _, port, probe in
            let response = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 3)
                return try client.roundTrip("GET", "/echo", headers: [("X-Big", String(repeating: "x", count: 8000))])
            }
            #expect(response.status == 431)
            #expect(probe.respondCalls == 0)
        }
    }

    @Test("concurrent clients: 16 connections × 50 requests")
    func concurrency() async throws {
        try await withServer({ $0.threads = 2 }) { server, port, probe in
            let failures = try await echoFromSixteenConnections(port: port, target: { _ in "/echo" })
            #expect(failures == 0)
            #expect(await probe.wait { $0.records.count == 800 })
            #expect(server.openConnections <= 16)
        }
    }

    @Test("a slow responder does not hold up fast requests")
    func slowDoesNotBlockFast() async throws {
        // The slow request is answered only when its deadline passes on the manual clock, which
        // the test moves after the fast ones are all answered: they were not held up by it.
        let clock = ManualClock()
        try await withServer(ClockedRulesTests.configure(clock)) { _, port, probe in
            let slowAnswered = Counter()
            async let slow = onThread {
                defer { slowAnswered.increment() }
                return try RawHTTPClient(port: port, receiveTimeout: 30).roundTrip("GET", "/slow?ms=600000")
            }
            #expect(await probe.wait(for: .seconds(20)) { $0.respondCalls == 1 })
            let fastStatuses = try await onThread {
                let client = try RawHTTPClient(port: port)
                return try (0..<50).map { _ in try client.roundTrip("GET", "/echo").status }
            }
            #expect(fastStatuses == Array(repeating: 200, count: 50))
            #expect(slowAnswered.value == 0, "the slow request was answered before the fast ones were done")
            clock.advance(by: .seconds(5))
            #expect(try await slow.status == 503)
        }
    }

    @Test("a responder past suspendedRequestDeadline gets 503, the connection stays usable")
    func suspensionDeadline() async throws {
        try await withServer({ $0.suspendedRequestDeadline = .milliseconds(300) }) { _, port, _ in
            // Ten minutes: only the deadline can answer it (its exact timing is ClockedRulesTests').
            let (late, next) = try await onThread {
                let client = try RawHTTPClient(port: port, receiveTimeout: 30)
                let late = try client.roundTrip("GET", "/slow?ms=600000")
                let next = try client.roundTrip("GET", "/echo")
                return (late, next)
            }
            #expect(late.status == 503)
            #expect(next.status == 200)
        }
    }
}
