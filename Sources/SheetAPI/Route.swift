import AccessControl
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTPServer
import SessionStore
import SheetCore
import SheetJSON

/// One entry of `RouteTable`: a path template and what answers it. The template is also the
/// route's name in metrics and logs (never a raw id).
package final class RouteEntry: Sendable {
    /// How the route answers.
    package enum Answer: Sendable {
        /// `POST` of an action on the session `{id}`: the body (and nothing else) decodes into a
        /// `SheetAction`, which the service applies: in place when the shard is idle, at most
        /// once with an `Idempotency-Key`, with `If-Match` honoured. The decoder refuses a bad
        /// body with a 400 code.
        case action(@Sendable ([UInt8]) throws(APIError) -> SheetAction)
        /// One handler per method the route answers.
        case handlers([MethodHandler])
    }

    /// The path, `{id}` standing for one path segment (a session id).
    package let template: String
    package let answer: Answer
    /// The methods the route answers, for 405 and `Allow` (HEAD is answered as GET).
    package let allowedMethods: [String]
    /// `template`'s bytes before its `{id}` (all of them when it has none) and after it (nil
    /// when it has none), so a path is matched by its length and two short comparisons.
    private let prefix: [UInt8]
    private let suffix: [UInt8]?

    init(_ template: String, _ answer: Answer) {
        self.template = template
        self.answer = answer
        let bytes = Array(template.utf8)
        if let open = bytes.firstIndex(of: UInt8(ascii: "{")), let close = bytes[open...].firstIndex(of: UInt8(ascii: "}")) {
            precondition(!bytes[(close + 1)...].contains(UInt8(ascii: "{")), "a route template names at most one {id}: \(template)")
            prefix = Array(bytes[..<open])
            suffix = Array(bytes[(close + 1)...])
        } else {
            prefix = bytes
            suffix = nil
        }
        switch answer {
        case .action: allowedMethods = ["POST"]
        case .handlers(let handlers): allowedMethods = handlers.map(\.method)
        }
    }

    static func action(_ template: String, decode: @escaping @Sendable ([UInt8]) throws(APIError) -> SheetAction) -> RouteEntry {
        RouteEntry(template, .action(decode))
    }

    static func handlers(_ template: String, _ handlers: MethodHandler...) -> RouteEntry {
        RouteEntry(template, .handlers(handlers))
    }

    /// Whether `path` fits the template, where `{id}` stands for one non-empty segment (no `/`):
    /// the byte range of that segment, an empty range when the template has none, or nil.
    fileprivate func match(_ path: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard let base = path.baseAddress else { return nil }
        guard let suffix else {
            return path.count == prefix.count && Self.bytes(at: base, equal: prefix) ? 0..<0 : nil
        }
        let end = path.count - suffix.count
        guard end > prefix.count, Self.bytes(at: base, equal: prefix), Self.bytes(at: base + end, equal: suffix),
              memchr(base + prefix.count, Int32(UInt8(ascii: "/")), end - prefix.count) == nil
        else { return nil }
        return prefix.count..<end
    }

    /// memcmp: a byte loop over the arrays with their bounds checks costs several times as much,
    /// and every request is matched.
    private static func bytes(at start: UnsafePointer<UInt8>, equal expected: [UInt8]) -> Bool {
        expected.withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress else { return true }
            return memcmp(start, base, bytes.count) == 0
        }
    }

    func handler(for method: String) -> MethodHandler? {
        guard case .handlers(let handlers) = answer else { return nil }
        return handlers.first { $0.method == method }
    }

    /// What the caller's role must allow for `method` here: an action changes its session;
    /// every handler declares its own.
    func requiredAccess(for method: String) -> RequiredAccess {
        switch answer {
        case .action: .changeSessions
        case .handlers(let handlers): handlers.first { $0.method == method }?.access ?? .changeSessions
        }
    }
}

/// What answers one method of a route.
package struct MethodHandler: Sendable {
    typealias Respond = @Sendable (SheetService) -> (RouteRequest) async throws(APIError) -> HTTPResponse
    /// Answers on the thread that read the request when it can, right away or later through the
    /// `DeferredAnswer`, once what it waits for is done; `.declined` hands the request to
    /// `respond`. It makes its own request id.
    typealias RespondInPlace = @Sendable (SheetService) -> (HTTPRequest, Route, Tenant, DeferredAnswer) -> InPlaceAnswer

    let method: String
    /// What a caller's role must allow: checked once at request entry (`SheetService.admit`).
    let access: RequiredAccess
    let respond: Respond
    let respondInPlace: RespondInPlace?

    static func get(_ access: RequiredAccess, _ respond: @escaping Respond, inPlace: RespondInPlace? = nil) -> MethodHandler {
        MethodHandler(method: "GET", access: access, respond: respond, respondInPlace: inPlace)
    }

    static func post(_ access: RequiredAccess, _ respond: @escaping Respond, inPlace: RespondInPlace? = nil) -> MethodHandler {
        MethodHandler(method: "POST", access: access, respond: respond, respondInPlace: inPlace)
    }

    static func delete(_ access: RequiredAccess, _ respond: @escaping Respond) -> MethodHandler {
        MethodHandler(method: "DELETE", access: access, respond: respond, respondInPlace: nil)
    }
}

/// A request on its way to a handler.
struct RouteRequest: Sendable {
    let request: HTTPRequest
    let route: Route
    /// Whose sessions the request may see (the default tenant on open routes and without keys).
    let tenant: Tenant
    let requestID: String

    var head: HTTPRequestHead { request.head }
}

/// A request path matched against `RouteTable`: which entry, and the `{id}` segment as text (an
/// id that cannot exist is "session not found", not "route not found").
package struct Route: Sendable, Equatable {
    /// The entry's position in `RouteTable.entries` (also where its metric cells are).
    package let index: Int
    /// The request's path, and where its `{id}` segment lies in its bytes (empty for templates
    /// without one): the segment itself is made only when asked for.
    let path: String
    let idRange: Range<Int>

    /// The `{id}` segment; empty for templates without one.
    package var id: Substring {
        let utf8 = path.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: idRange.lowerBound)
        return Substring(utf8[start..<utf8.index(start, offsetBy: idRange.count)])
    }

    /// The session the `{id}` segment names, read from the path's bytes; nil when it names none.
    var sessionID: SessionID? {
        path.utf8.withContiguousStorageIfAvailable { SessionID(utf8: UnsafeBufferPointer(rebasing: $0[idRange])) }
            ?? SessionID(id)
    }

    package var entry: RouteEntry { RouteTable.entries[index] }
    package var template: String { withEntry { $0.template } }

    /// Calls `body` with the route's entry, borrowed (`RouteTable.withEntry`): what the request
    /// path reads of it on every request. (Pass a closure, not a key path: reading a class's
    /// property through a key path makes a dynamic exclusivity check, even of a `let`.)
    func withEntry<Result>(_ body: (RouteEntry) throws -> Result) rethrows -> Result {
        try RouteTable.withEntry(at: index, body)
    }

    /// The route `preflight` found for a request (its index, kept in the head's `tag`), else
    /// the path's.
    package init?(tag: Int, path: String) {
        // The tagged entry is matched again (one entry, not the whole table): a tag is trusted
        // only for the path it was found for.
        guard tag >= 0, tag < RouteTable.entries.count,
              let idRange = path.utf8.withContiguousStorageIfAvailable({ bytes in RouteTable.withEntry(at: tag) { $0.match(bytes) } }) ?? nil else {
            self.init(path: path)
            return
        }
        self.init(index: tag, id: idRange, in: path)
    }

    private init(index: Int, id range: Range<Int>, in path: String) {
        self.index = index
        self.path = path
        idRange = range
    }

    package static func == (a: Route, b: Route) -> Bool { a.index == b.index && a.id == b.id }

    package init?(path: String) {
        // Parsed three times per request (preflight, answer, log): one scan of the contiguous
        // bytes per template tried, no splitting, no String comparisons and no allocation.
        let found = path.utf8.withContiguousStorageIfAvailable { Route.find($0) }
            ?? Array(path.utf8).withUnsafeBufferPointer { Route.find($0) }
        guard let (index, idRange) = found else { return nil }
        self.init(index: index, id: idRange, in: path)
    }

    /// The first entry whose template matches, and the byte range of its `{id}` (empty if none).
    private static func find(_ path: UnsafeBufferPointer<UInt8>) -> (Int, Range<Int>)? {
        for index in RouteTable.entries.indices {
            if let id = RouteTable.withEntry(at: index, { $0.match(path) }) { return (index, id) }
        }
        return nil
    }
}
