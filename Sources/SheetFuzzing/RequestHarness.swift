import HTTPServer
import SessionStore
import SheetAPI
import SheetCore
import SheetObservability
import SheetJSON

/// Runs fuzz input through sheetd's API layer in-process (no sockets): the JSON body decoders
/// directly, then the input read as a short script of requests against a fresh in-memory store,
/// through `SheetService.preflight`, `respondInPlace(to:later:)` and `respond(to:)` exactly as the
/// HTTP layer calls them.
///
/// Script format (each part optional): requests separated by a line `%%`; in each, a request
/// line `METHOD target`, header lines `Name: value`, a blank line, then the body bytes. `$0` and
/// `$1` in the target and the body stand for the ids of two sessions created before the script
/// runs (in a body: a sheet presented over one of them, `{"parent":"$0"}`). The
/// head is reduced the way the HTTP layer hands it over (the target read by `RequestTarget`,
/// header values cut at a NUL and trimmed), so the service sees only what it can see in production. `Accept:
/// text/event-stream` is dropped: a stream ends only when the HTTP layer releases its response.
///
/// Invariants checked (a broken one traps, so a fuzzer reports it):
/// - no answer is a 5xx, other than 503 capacity_exceeded;
/// - every header value is free of CR, LF and NUL (no response splitting);
/// - every JSON answer is a JSON object sheetd's own strict parser reads back, and every error
///   answer carries a known code whose status is the answer's status;
/// - an ETag is a quoted decimal version;
/// - a request with `If-Match: "<n>"` (and no Idempotency-Key) that names a session at another
///   version never succeeds;
/// - a successful POST with a valid Idempotency-Key, sent again at once, is answered with the
///   same status and body and `Idempotent-Replayed: true`.
public final class RequestHarness: Sendable {
    public init() {}

    /// At most this many requests per input, so one input stays fast.
    public static let maximumRequests = 8

    public func run(_ bytes: [UInt8]) async {
        FuzzEntry.decodeAllBodies(bytes)

        var storeConfiguration = SessionStore.Configuration()
        storeConfiguration.shardCount = 2
        storeConfiguration.maxSessions = 8
        storeConfiguration.idempotencyCapacity = 32
        let store = SessionStore(configuration: storeConfiguration)
        var serviceConfiguration = SheetService.Configuration()
        serviceConfiguration.maximumWait = 0.002
        serviceConfiguration.streamKeepAlive = .milliseconds(2)
        let service = SheetService(store: store, configuration: serviceConfiguration,
                                   observer: ServiceObserver(level: .off, log: LogSink { _ in }))

        var ids: [String] = []
        for body in [#"{}"#, #"{"detents":["height:300","medium","large"],"dismissPolicy":"intercept"}"#] {
            let created = await service.respond(to: HTTPRequest(
                head: HTTPRequestHead(method: .post, path: "/sessions"), body: Array(body.utf8)))
            guard case .bytes(let answer) = created.body, created.status == 201,
                  case .object(let members)? = try? JSONParser.parse(answer),
                  case .string(let id)? = members.first(where: { $0.key == "id" })?.value
            else { preconditionFailure("the harness could not create its sessions: \(created.status)") }
            ids.append(id)
        }

        for request in Self.requests(from: bytes, sessionIDs: ids) {
            await perform(request, service: service, store: store, ids: ids)
        }
    }

    private func perform(_ request: HTTPRequest, service: SheetService, store: SessionStore, ids: [String]) async {
        var request = request
        if let early = service.preflight(request.head, tag: &request.head.tag) {
            Self.check(early, for: request)
            return
        }
        // The version the named session is at now, when the request states a precondition.
        var stale = false
        if let expected = Self.simpleIfMatch(request.head), request.head.headers["Idempotency-Key"] == nil,
           let id = ids.first(where: { request.head.path.hasPrefix("/sessions/\($0)") }).flatMap(SessionID.init),
           let current = try? await store.session(id, of: .default) {
            stale = current.sheet.version != expected
        }
        let (deferred, sink) = AsyncStream<HTTPResponse>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let later = DeferredAnswer { response in
            sink.yield(response)
            sink.finish()
            return true
        }
        let response: HTTPResponse
        switch service.respondInPlace(to: request, later: later) {
        case .answered(let answer):
            response = answer
        case .deferred:
            var answers = deferred.makeAsyncIterator()
            guard let answer = await answers.next() else { preconditionFailure("a deferred answer was never given") }
            response = answer
        case .declined:
            response = await service.respond(to: request)
        }
        Self.check(response, for: request)
        if stale && (200...299).contains(response.status) && request.head.method != .get && request.head.method != .head {
            preconditionFailure("If-Match named another version, yet \(request.head.method) \(request.head.path) answered \(response.status)")
        }
        if request.head.method == .post, (200...299).contains(response.status),
           let key = request.head.headers["Idempotency-Key"], (1...128).contains(key.utf8.count),
           key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) {
            let again = await service.respond(to: request)
            Self.check(again, for: request)
            guard again.status == response.status, again.headers["Idempotent-Replayed"] == "true",
                  case .bytes(let first) = response.body, case .bytes(let second) = again.body, first == second
            else { preconditionFailure("a retry of \(request.head.path) with Idempotency-Key \(key) was not replayed: \(response.status) then \(again.status)") }
        }
    }

    // MARK: Invariants

    static func check(_ response: HTTPResponse, for request: HTTPRequest) {
        let what = "\(request.head.method) \(request.head.path)"
        precondition((100...599).contains(response.status), "\(what): status \(response.status)")
        for (name, value) in response.headers {
            precondition(!name.isEmpty && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") },
                         "\(what): header name \(name.debugDescription)")
            precondition(!value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }, "\(what): header \(name) value \(value.debugDescription)")
        }
        if let etag = response.headers["ETag"] {
            let utf8 = Array(etag.utf8)
            precondition(utf8.count >= 3 && utf8.first == 0x22 && utf8.last == 0x22 && utf8[1..<(utf8.count - 1)].allSatisfy { $0 >= 0x30 && $0 <= 0x39 },
                         "\(what): ETag \(etag.debugDescription)")
        }
        switch response.body {
        case .stream(let stream):
            precondition(response.status == 200, "\(what): a stream with status \(response.status)")
            stream.finish()
        case .bytes(let body):
            var errorCode: String?
            if response.headers["Content-Type"]?.hasPrefix("application/json") == true {
                guard case .object(let members)? = try? JSONParser.parse(body) else {
                    preconditionFailure("\(what): a JSON answer sheetd cannot read back: \(String(decoding: body, as: UTF8.self))")
                }
                if case .object(let error)? = members.first(where: { $0.key == "error" })?.value,
                   case .string(let code)? = error.first(where: { $0.key == "code" })?.value {
                    errorCode = code
                    guard let known = APIError.Code(rawValue: code) else { preconditionFailure("\(what): unknown error code \(code)") }
                    precondition(known.status == response.status, "\(what): \(code) answered with \(response.status)")
                }
            }
            if response.status >= 500 {
                precondition(response.status == 503 && errorCode == "capacity_exceeded",
                             "\(what): server error \(response.status) \(String(decoding: body, as: UTF8.self))")
            }
            if response.status >= 400 {
                precondition(errorCode != nil, "\(what): \(response.status) without an error body")
            }
        }
    }

    /// `"<digits>"` exactly (after trimming), as the service reads it; nil for anything else.
    static func simpleIfMatch(_ head: HTTPRequestHead) -> UInt64? {
        guard let raw = head.headers["If-Match"] else { return nil }
        let utf8 = Array(raw.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed())
        guard utf8.count >= 3, utf8.first == 0x22, utf8.last == 0x22,
              utf8[1..<(utf8.count - 1)].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else { return nil }
        return UInt64(String(decoding: utf8[1..<(utf8.count - 1)], as: UTF8.self))
    }

    // MARK: Reading the script

    /// The requests an input describes, reduced the way libmicrohttpd hands them over.
    public static func requests(from bytes: [UInt8], sessionIDs: [String]) -> [HTTPRequest] {
        var requests: [HTTPRequest] = []
        for part in split(bytes, separator: Array("\n%%\n".utf8)).prefix(maximumRequests) {
            var lines: [ArraySlice<UInt8>] = []
            var rest = part[...]
            var body: [UInt8] = []
            // Head lines until the first empty line; the rest is the body.
            while true {
                guard let newline = rest.firstIndex(of: 0x0A) else {
                    lines.append(rest)
                    break
                }
                var line = rest[rest.startIndex..<newline]
                if line.last == 0x0D { line = line.dropLast() }
                rest = rest[(newline + 1)...]
                if line.isEmpty && !lines.isEmpty {
                    body = Array(rest)
                    break
                }
                lines.append(line)
            }
            guard let requestLine = lines.first else { continue }
            let words = requestLine.split(separator: 0x20, maxSplits: 1, omittingEmptySubsequences: false)
            let method = cString(words.first ?? [])
            var target = words.count > 1 ? Array(words[1]) : Array("/".utf8)
            if let version = target.lastIndex(of: 0x20) { target = Array(target[..<version]) } // "path HTTP/1.1"
            for (index, id) in sessionIDs.enumerated() {
                target = replace(Array("$\(index)".utf8), with: Array(id.utf8), in: target)
                body = replace(Array("$\(index)".utf8), with: Array(id.utf8), in: body)
            }
            let parsed = RequestTarget(raw: String(decoding: target, as: UTF8.self))
            var headers = HTTPHeaders()
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
                let name = cString(line[line.startIndex..<colon])
                let value = cString(Array(line[(colon + 1)...]).trimmingSpaces())
                guard !name.isEmpty else { continue }
                // Event streams end only when the HTTP layer releases their response, which this
                // harness (no HTTP layer) cannot do; their parameters are read as plain events reads.
                if name.lowercased() == "accept" && value.contains("event-stream") { continue }
                headers.add(name, value)
            }
            let head = HTTPRequestHead(method: HTTPMethod(rawValue: method), path: parsed.path,
                                       query: parsed.query, headers: headers, clientAddress: "127.0.0.1")
            requests.append(HTTPRequest(head: head, body: body))
        }
        return requests
    }

    private static func split(_ bytes: [UInt8], separator: [UInt8]) -> [[UInt8]] {
        var parts: [[UInt8]] = []
        var start = 0
        var index = 0
        while index + separator.count <= bytes.count {
            if bytes[index..<(index + separator.count)].elementsEqual(separator) {
                parts.append(Array(bytes[start..<index]))
                index += separator.count
                start = index
            } else {
                index += 1
            }
        }
        parts.append(Array(bytes[start...]))
        return parts
    }

    private static func replace(_ token: [UInt8], with replacement: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if index + token.count <= bytes.count && bytes[index..<(index + token.count)].elementsEqual(token) {
                out += replacement
                index += token.count
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    /// What a C string carries: everything before the first NUL, repaired to valid UTF-8 the way
    /// `String(cString:)` does in the HTTP layer.
    private static func cString(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}

extension Array where Element == UInt8 {
    fileprivate func trimmingSpaces() -> ArraySlice<UInt8> {
        var slice = self[...]
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return slice
    }
}
