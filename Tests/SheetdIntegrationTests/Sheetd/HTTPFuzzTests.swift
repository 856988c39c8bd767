import Foundation
import Synchronization
import SheetFuzzing
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Hostile bytes at the HTTP level, against the real binary over loopback: random and mutated
/// requests (bad request lines, huge and duplicate headers, bad chunking, NUL bytes, broken
/// UTF-8, deep JSON) from a seeded generator, for a fixed count. Every answer must be a
/// well-formed HTTP answer, none a server error, and afterwards the server still answers and a
/// session that only ever got requests it must refuse is unchanged.
///
/// The server runs with an API key; most requests carry it (so they reach the routes), the others
/// no key or a random `Authorization` header, which must be refused (401) and change nothing.
///
/// `SHEETD_HTTP_FUZZ_SEED` and `SHEETD_HTTP_FUZZ_COUNT` replay or lengthen a run (`.ci/fuzz`);
/// `SHEETD_HTTP_FUZZ_DUMP=<directory>` writes each request that led to a finding there.
@Suite("HTTP fuzzing")
struct HTTPFuzzTests {
    static let seed: UInt64 = ProcessInfo.processInfo.environment["SHEETD_HTTP_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x5EED_0007
    static let count: Int = ProcessInfo.processInfo.environment["SHEETD_HTTP_FUZZ_COUNT"].flatMap { Int($0) } ?? 3000

    @Test func hostileRequestsNeitherCrashNorChangeSessions() async throws {
        try await offPool {
            let keyed = try KeyedSheetd(["fuzz/app"], arguments: ["--idle-timeout", "1s", "--log-level", "off"])
            let server = keyed.server
            let key = keyed.keys["fuzz/app"]!
            let authorization = [("Authorization", "Bearer \(key)")]
            let client = try server.client()
            let sentinel = try RobustnessTests.create(client, headers: authorization)
            let decoy = try RobustnessTests.create(client, headers: authorization)
            let before = try client.request("GET", "/sessions/\(sentinel)", headers: authorization)
            let eventsBefore = try client.request("GET", "/sessions/\(sentinel)/events?after=0", headers: authorization)

            struct Finding: Sendable { let index: Int; let problem: String; let request: String }
            let findings = Locked<[Finding]>([])
            let statuses = Locked<[Int: Int]>([:])
            let knownDefects = Atomic<Int>(0)
            // Many workers: under load libmicrohttpd sometimes misses the end of a half-closed
            // connection whose request is incomplete (it reads the last bytes and the FIN in one
            // go and waits for another edge) and keeps it until --idle-timeout; those wait in parallel.
            let workers = 64
            let port = server.port
            let (seed, count) = (Self.seed, Self.count)
            let dump = ProcessInfo.processInfo.environment["SHEETD_HTTP_FUZZ_DUMP"] // where failing requests are written
            onThreads(workers) { worker in
                var fuzzer = RequestFuzzer(seed: seed &+ UInt64(worker), sentinel: sentinel, decoy: decoy, key: key)
                for index in stride(from: worker, to: count, by: workers) {
                    let request = fuzzer.next()
                    func report(_ problem: String) {
                        findings.withLock { $0.append(Finding(index: index, problem: problem, request: StrictHTTP.describe(request.bytes.prefix(160)))) }
                        if let directory = dump {
                            _ = FileManager.default.createFile(atPath: "\(directory)/request-\(index).bin", contents: Data(request.bytes))
                        }
                    }
                    guard let connection = WireConnection(port: port, receiveTimeout: 5) else {
                        report("connect failed: \(String(cString: strerror(errno)))")
                        continue
                    }
                    // The server may answer and close before it has read everything (413, 431,
                    // 400 on a broken head): a failed send is fine, a bad answer is not.
                    connection.send(request.bytes)
                    connection.shutdownWrite()
                    let (bytes, closed) = connection.readToEnd()
                    if !closed { report("no close within 5 s after the request was complete") }
                    let (answers, problem, defects) = StrictHTTP.parseAll(bytes)
                    if let problem { report(problem) }
                    if defects > 0 { knownDefects.add(defects, ordering: .relaxed) }
                    statuses.withLock { for answer in answers { $0[answer.status, default: 0] += 1 } }
                    for answer in answers {
                        if answer.status >= 500 && ![501, 505].contains(answer.status) {
                            report("server error \(answer.status): \(StrictHTTP.describe(answer.body))")
                        }
                        if answer.header("Content-Type")?.hasPrefix("application/json") == true,
                           (try? JSONSerialization.jsonObject(with: Data(answer.body))) == nil {
                            report("a JSON answer that is not JSON: \(StrictHTTP.describe(answer.body))")
                        }
                    }
                }
            }
            let found = findings.withLock { $0 }
            // One example of each kind of problem (the text before the first colon).
            var kinds: [String: (count: Int, example: Finding)] = [:]
            for finding in found {
                let kind = String(finding.problem.prefix { $0 != ":" })
                kinds[kind, default: (0, finding)].count += 1
            }
            let summary = kinds.sorted { $0.key < $1.key }.map { "\n  \($0.value.count)× \($0.key) — e.g. #\($0.value.example.index) \($0.value.example.problem) ← \($0.value.example.request)" }
            let clean = found.isEmpty
            #expect(clean, "seed \(Self.seed), \(Self.count) requests: \(found.count) finding(s):\(summary.joined())")
            let seen = statuses.withLock { $0 }
            #expect(seen.values.reduce(0, +) >= Self.count / 2,
                    "most requests got an answer: \(seen.sorted { $0.key < $1.key }), \(knownDefects.load(ordering: .relaxed)) with libmicrohttpd's doubled error head")

            #expect(server.process.isRunning)
            let after = try server.client()
            #expect(try after.request("GET", "/healthz").status == 200)
            let sentinelNow = try after.request("GET", "/sessions/\(sentinel)", headers: authorization)
            #expect(sentinelNow.body == before.body, "the sentinel session changed: \(sentinelNow.text)")
            #expect(try after.request("GET", "/sessions/\(sentinel)/events?after=0", headers: authorization).body == eventsBefore.body)
            #expect(server.stop() == 0)
        }
    }
}

/// Builds hostile requests. Requests naming the sentinel session always carry a wrong
/// `If-Match` first and are never mutated byte by byte, so no outcome may change it; every
/// other request may be anything at all.
struct RequestFuzzer {
    var random: SeededGenerator
    let sentinel: String
    let decoy: String
    /// The server's one API key.
    let key: String

    init(seed: UInt64, sentinel: String, decoy: String, key: String) {
        random = SeededGenerator(seed: seed)
        self.sentinel = sentinel
        self.decoy = decoy
        self.key = key
    }

    /// Usually the valid key, else nothing or a random `Authorization` header.
    private mutating func authorization() -> [[UInt8]] {
        if chance(0.8) { return [Array("Authorization: Bearer \(key)".utf8)] }
        return chance(0.5) ? [] : [randomAuthorization()]
    }

    private mutating func randomAuthorization() -> [UInt8] {
        let token = String((0..<number(0...60)).map { _ in pick(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=")) })
        switch number(0...9) {
        case 0: return Array("Authorization: Bearer \(key)x".utf8)
        case 1: return Array("Authorization: Bearer \(key.dropLast())".utf8)
        case 2: return Array("Authorization: bearer \(token)".utf8)
        case 3: return Array("Authorization: Basic \(token)".utf8)
        case 4: return Array("Authorization: Bearer".utf8)
        case 5: return Array("Authorization: Bearer \(String(repeating: "k", count: pick([1023, 1024, 5000])))".utf8)
        case 6: return Array("Authorization: Bearer ".utf8) + bytes(number(1...40))
        case 7: return Array("Authorization: Bearer \(key) \(key)".utf8)
        case 8: return Array("Authorization:".utf8)
        default: return Array("Authorization: Bearer \(token)".utf8)
        }
    }

    mutating func pick<T>(_ options: [T]) -> T { options[Int.random(in: 0..<options.count, using: &random)] }
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
    mutating func number(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) } }

    mutating func next() -> (bytes: [UInt8], sentinel: Bool) {
        let targetsSentinel = chance(0.25)
        var request = targetsSentinel ? sentinelRequest() : anyRequest()
        if !targetsSentinel && chance(0.3) { mutate(&request) }
        if chance(0.1) { request += Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8) } // pipelined
        return (request, targetsSentinel)
    }

    // MARK: Requests

    private mutating func sentinelRequest() -> [UInt8] {
        // Shapes that reached the sentinel without an If-Match on a lax server: a DELETE
        // smuggled in a body whose Content-Length has a space before its colon, an escaped NUL
        // or slash after the id. Each must be refused or miss the session.
        if chance(0.2) {
            let smuggled = "DELETE /sessions/\(sentinel) HTTP/1.1\r\nHost: x\r\n\r\n"
            return Array(pick([
                "POST /sessions/\(sentinel)/dismiss HTTP/1.1\r\nHost: x\r\nContent-Length : \(smuggled.utf8.count)\r\n\r\n\(smuggled)",
                "POST /sessions/\(sentinel)/dismiss HTTP/1.1\r\nHost: x\r\nContent-Length\t: \(smuggled.utf8.count)\r\n\r\n\(smuggled)",
                "DELETE /sessions/\(sentinel)%00x HTTP/1.1\r\nHost: x\r\n\r\n",
                "DELETE /sessions/\(sentinel)%2F HTTP/1.1\r\nHost: x\r\n\r\n",
                "POST /sessions/\(sentinel)%2Fdrag HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n{\"to\":\"closed\"}",
                "POST /sessions/\(sentinel)%00/dismiss HTTP/1.1\r\nHost: x\r\n\r\n",
                "POST /sessions/\(sentinel)/dismiss HTTP/1.1\r\nHost: x\r\nContent-Length: +0\r\n\r\n",
                "POST /sessions/\(sentinel)/dismiss HTTP/1.1\r\nHost: x\r\nIf-Match: W/\"1\"\r\nContent-Length: 0\r\n\r\n",
                // A Content-Length libmicrohttpd cannot parse, or too large, with a DELETE as its "body".
                "POST /sessions/\(sentinel)/dismiss HTTP/1.1\r\nHost: x\r\nContent-Length: \(pick(["-1", "+15", "0xf", "15x", "1 5"]))\r\n\r\n\(smuggled)",
                "POST /sessions/\(sentinel)/dismiss HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n\(smuggled)",
                // HTTP/1.1 without Host, and a NUL in a field value.
                "DELETE /sessions/\(sentinel) HTTP/1.1\r\n\r\n",
                "DELETE /sessions/\(sentinel) HTTP/1.1\r\nHost: x\r\nX-Note: a\u{0}b\r\n\r\n",
            ]).utf8)
        }
        let method = pick(["POST", "POST", "POST", "DELETE", "GET", "PUT"])
        let path = pick(["/sessions/\(sentinel)", "/sessions/\(sentinel)/drag", "/sessions/\(sentinel)/confirm",
                         "/sessions/\(sentinel)/dismiss", "/sessions/\(sentinel)/present"])
        var headers: [[UInt8]] = [Array("Host: x".utf8), Array("If-Match: \"424242\"".utf8)] + authorization()
        for _ in 0..<number(0...4) { headers.append(randomHeader(allowFolding: false, allowPreconditions: false)) }
        return assemble(method: Array(method.utf8), path: Array(path.utf8), version: Array("HTTP/1.1".utf8), headers: headers, body: body())
    }

    private mutating func anyRequest() -> [UInt8] {
        let method: [UInt8] = chance(0.85)
            ? Array(pick(["GET", "POST", "POST", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "TRACE", "get", "post"]).utf8)
            : pick([Array("G\u{0}T".utf8), Array("POST POST".utf8), [], Array(String(repeating: "M", count: 300).utf8), bytes(number(1...8))])
        let version: [UInt8] = chance(0.85)
            ? Array("HTTP/1.1".utf8)
            : Array(pick(["HTTP/1.0", "HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "http/1.1", "HTTP/1.1 x", "", "HTTP/11", "HTTP/1.1\u{0}"]).utf8)
        var headers: [[UInt8]] = (chance(0.9) ? [Array("Host: x".utf8)] : []) + authorization()
        for _ in 0..<number(0...5) { headers.append(randomHeader(allowFolding: true, allowPreconditions: true)) }
        if chance(0.03) { headers += (0..<number(90...160)).map { Array("X-Many-\($0): v".utf8) } }
        if chance(0.03) { headers.append(Array("X-Huge: ".utf8) + [UInt8](repeating: UInt8(ascii: "h"), count: number(8_000...40_000))) }
        return assemble(method: method, path: randomPath(), version: version, headers: headers, body: body())
    }

    private mutating func randomPath() -> [UInt8] {
        let actions = ["drag", "confirm", "dismiss", "present", "events", "nope", ""]
        switch number(0...13) {
        case 0: return Array("/sessions".utf8)
        case 1: return Array("/sessions/\(decoy)".utf8)
        case 2, 3: return Array("/sessions/\(decoy)/\(pick(actions))".utf8)
        case 4: return Array(pick(["/healthz", "/metrics", "/openapi.yaml", "/", "*", "", "http://x/healthz",
                                   "http://x/sessions/\(decoy)", "HTTPS://x", "/sessions/\(decoy)%2Fdrag", "/sessions/\(decoy)%00x"]).utf8)
        case 5: return Array("/sessions?limit=\(pick(["0", "1", "1000", "1001", "-1", "abc", "99999999999999999999", "", "%00"]))".utf8)
        case 6: return Array("/sessions?phase=\(pick(["presented", "x", "", "%ff"]))&after=\(pick(["c1", "c", "czzzzzzzzzzzzzzzzz", "%00", "c-1"]))".utf8)
        case 7: return Array("/sessions/\(decoy)/events?after=\(pick(["0", "1", "-1", "x", "18446744073709551616", ""]))".utf8)
        case 8: return Array(pick(["/sessions/%00", "/sessions/%ff%fe/drag", "/%2e%2e/%2e%2e/etc/passwd", "/sessions//drag", "/sessions/\(decoy)/drag/extra", "/healthz?%zz"]).utf8)
        case 9: return Array("/sessions/".utf8) + Array(String((0..<22).map { _ in pick(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")) }).utf8)
        case 10: return [UInt8(ascii: "/")] + bytes(number(1...40))
        case 11: return Array("/sessions/".utf8) + [0xFF, 0xC0, 0xAF, 0x00, 0x80] + Array("/drag".utf8)
        case 12: return [UInt8(ascii: "/")] + [UInt8](repeating: UInt8(ascii: "a"), count: pick([200, 5_000, 20_000]))
        default: return Array("/sessions/\(decoy)/drag?x=\(pick(["1", "%00", "\u{E9}", "a&b=c&&=", String(repeating: "q", count: 3000)]))".utf8)
        }
    }

    private mutating func randomHeader(allowFolding: Bool, allowPreconditions: Bool) -> [UInt8] {
        var options = [
            "Content-Type: application/json", "Content-Type: text/plain", "Content-Type: \u{0}",
            "Idempotency-Key: \(pick(["k1", "k2", "k3", "", "a b", String(repeating: "k", count: 129), "\u{E9}t\u{E9}"]))",
            "X-Request-Id: \(pick(["r1", "", "\u{E9}", String(repeating: "r", count: 200), "a\tb"]))",
            "Accept: \(pick(["application/json", "*/*", "text/html"]))",
            "Connection: \(pick(["close", "keep-alive", "upgrade", "\u{1}"]))",
            "Expect: \(pick(["100-continue", "200-ok"]))",
            "Content-Length: \(pick(["-1", "abc", " 5", "5, 5", "0x10", "99999999999999999999", "18446744073709551615", "1 2"]))",
            "Transfer-Encoding: \(pick(["chunked", "gzip", "chunked, identity", "xchunked", "identity", "chunked, chunked"]))",
            "NoColonHere", "Host : spaced", ": empty-name", "X-Empty:", "X-\u{E9}: v",
            "Content-Length : 0", "Transfer-Encoding\t: chunked", "X-Nul: a\u{0}b", "X-Request-Id: \u{0}", "X-Ctl: a\u{1}b",
            "Content-Length: \(pick(["+15", "0xf", "15x", "1 5"]))", "Host: second",
            "X-Utf8: \u{1F600}", "Cookie: a=b; c=d",
        ]
        if allowPreconditions {
            options += ["If-Match: \(pick(["*", "\"1\"", "\"2\"", "1", "W/\"1\"", "\"1\", \"2\"", "", "\"x\", W/\"1\"", ",", "\"1\",,\"2\""]))",
                        "If-None-Match: \(pick(["*", "\"1\"", "W/\"1\"", "\"1\", \"2\"", "1", ""]))"]
        }
        var header = Array(pick(options).utf8)
        if chance(0.1) { header = Array("X-".utf8) + bytes(number(1...12)) + Array(": ".utf8) + bytes(number(0...30)) }
        if chance(0.05) { header = randomAuthorization() }
        if allowFolding && chance(0.05) { header += Array("\r\n  folded".utf8) }
        return header
    }

    private mutating func body() -> [UInt8] {
        let valid = [
            #"{"to":"medium"}"#, #"{"to":"closed"}"#, #"{"to":"height:300"}"#, #"{"action":"save"}"#, #"{"action":"discard"}"#,
            #"{"reason":"done"}"#, "{}", "", #"{"translation":120.5,"velocity":-2000}"#,
            #"{"detents":["medium","large","fraction:0.3","height:200"],"defaultDetent":"medium","dismissPolicy":"intercept"}"#,
        ]
        switch number(0...15) {
        case 0...3: return Array(pick(valid).utf8)
        case 4...6:
            var bytes = Array(pick(valid).utf8)
            mutate(&bytes)
            return bytes
        case 7:
            let depth = pick([10, 31, 33, 1_000, 60_000])
            return chance(0.5)
                ? [UInt8](repeating: UInt8(ascii: "["), count: depth) + [UInt8](repeating: UInt8(ascii: "]"), count: depth)
                : Array((String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)).utf8)
        case 8: return Array(pick([#"{"translation":1e400}"#, #"{"translation":-1e-400}"#, #"{"containerHeight":123456789012345678901234567890}"#,
                                    #"{"translation":NaN}"#, #"{"velocity":Infinity,"translation":1}"#, #"{"containerHeight":-0.0}"#]).utf8)
        case 9: return Array(#"{"to":""#.utf8) + pick([[0xFF, 0xFE], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x00]]) + Array(#""}"#.utf8)
        case 10: return Array(pick([#"{"to":"me\u0000dium"}"#, #"{"to":"\ud800"}"#, #"{"to\u0000":"medium"}"#, #"{"to":"medium","to":"large"}"#]).utf8)
        case 11: return Array(pick(["null", "[]", "\"medium\"", "1", "true", " ", "{", "}", "{\"to\":}", "\u{FEFF}{}"]).utf8)
        case 12: return bytes(number(1...300))
        case 13: return [UInt8](repeating: UInt8(ascii: " "), count: pick([65_536, 65_537, 70_000]))
        default: return Array(#"{"to":"medium"}"#.utf8) + [0x00] + bytes(number(0...10))
        }
    }

    /// Frames the body: usually a correct Content-Length, otherwise one of the ways framing breaks.
    private mutating func assemble(method: [UInt8], path: [UInt8], version: [UInt8], headers: [[UInt8]], body: [UInt8]) -> [UInt8] {
        let newline: [UInt8] = chance(0.95) ? [13, 10] : pick([[10], [13], [13, 13, 10]])
        var head = method + [0x20] + path + (version.isEmpty ? [] : [0x20] + version) + newline
        for header in headers { head += header + newline }
        var framed: [UInt8]
        switch number(0...19) {
        case 0...11:
            head += Array("Content-Length: \(body.count)".utf8) + newline
            framed = body
        case 12:
            head += Array("Content-Length: \(max(0, body.count - number(1...5)))".utf8) + newline
            framed = body
        case 13:
            head += Array("Content-Length: \(body.count + number(1...100))".utf8) + newline
            framed = body
        case 14:
            framed = body // no length at all: the body reads as the next request
        case 15:
            head += Array("Content-Length: \(body.count)".utf8) + newline + Array("Content-Length: \(body.count + 1)".utf8) + newline
            framed = body
        case 16:
            head += Array("Content-Length: \(body.count)".utf8) + newline + Array("Transfer-Encoding: chunked".utf8) + newline
            framed = chunked(body, broken: chance(0.5))
        default:
            head += Array("Transfer-Encoding: chunked".utf8) + newline
            framed = chunked(body, broken: chance(0.4))
        }
        return head + newline + framed
    }

    private mutating func chunked(_ body: [UInt8], broken: Bool) -> [UInt8] {
        var out: [UInt8] = []
        var rest = body[...]
        while !rest.isEmpty {
            let size = min(rest.count, number(1...max(1, min(rest.count, 4096))))
            var sizeLine = Array(String(size, radix: 16).utf8)
            if chance(0.1) { sizeLine += Array(";ext=\(pick(["1", "\"q\"", ""]))".utf8) }
            out += sizeLine + [13, 10] + rest.prefix(size) + [13, 10]
            rest = rest.dropFirst(size)
        }
        out += Array("0\r\n".utf8)
        if chance(0.1) { out += Array("X-Trailer: t\r\n".utf8) }
        out += [13, 10]
        guard broken else { return out }
        switch number(0...6) {
        case 0: return Array("zz\r\n".utf8) + out
        case 1: return Array("-1\r\nx\r\n".utf8) + out
        case 2: return Array("ffffffffffffffffffff\r\n".utf8) + out
        case 3: return Array("5\r\nabc\r\n".utf8) + out // size larger than the data
        case 4: return Array("2\r\nabcdef\r\n".utf8) + out // data larger than the size
        case 5: return Array(out.dropLast(5)) // no last chunk
        default: return Array("1\r\na".utf8) + out // missing CRLF after the data
        }
    }

    private mutating func mutate(_ bytes: inout [UInt8]) {
        for _ in 0..<number(1...4) {
            switch number(0...4) {
            case 0 where !bytes.isEmpty: bytes[number(0...(bytes.count - 1))] = UInt8.random(in: 0...255, using: &random)
            case 1: bytes.insert(pick([0x00, 0x0D, 0x0A, 0x22, 0x7B, 0x7D, 0x5C, 0xFF, 0x20, 0x3A]), at: number(0...bytes.count))
            case 2 where !bytes.isEmpty: bytes.remove(at: number(0...(bytes.count - 1)))
            case 3 where bytes.count > 2:
                let start = number(0...(bytes.count - 2))
                let end = number((start + 1)...min(bytes.count, start + 64))
                bytes.insert(contentsOf: bytes[start..<end], at: number(0...bytes.count))
            case 4 where !bytes.isEmpty: bytes.removeLast(number(1...bytes.count))
            default: break
            }
        }
    }
}
