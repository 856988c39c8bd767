import AccessControl
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
    /// `template`'s bytes, matched against a request path without allocating.
    fileprivate let pattern: [UInt8]

    init(_ template: String, _ answer: Answer) {
        self.template = template
        self.answer = answer
        self.pattern = Array(template.utf8)
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
    /// Answers without waiting when it can, on the thread that read the request; nil hands the
    /// request to `respond`. It makes its own request id.
    typealias RespondInPlace = @Sendable (SheetService) -> (HTTPRequest, Route, Tenant) -> HTTPResponse?

    let method: String
    /// What a caller's role must allow: checked once at request entry (`SheetService.admit`).
    let access: RequiredAccess
    let respond: Respond
    let respondInPlace: RespondInPlace?

    static func get(_ access: RequiredAccess, _ respond: @escaping Respond, inPlace: RespondInPlace? = nil) -> MethodHandler {
        MethodHandler(method: "GET", access: access, respond: respond, respondInPlace: inPlace)
    }

    static func post(_ access: RequiredAccess, _ respond: @escaping Respond) -> MethodHandler {
        MethodHandler(method: "POST", access: access, respond: respond, respondInPlace: nil)
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
    /// The `{id}` segment; empty for templates without one.
    package let id: Substring

    package var entry: RouteEntry { RouteTable.entries[index] }
    package var template: String { entry.template }

    package init?(path: String) {
        // Parsed three times per request (preflight, answer, log): one scan of the contiguous
        // bytes per template tried, no splitting, no String comparisons and no allocation.
        let found = path.utf8.withContiguousStorageIfAvailable { Route.find($0) }
            ?? Array(path.utf8).withUnsafeBufferPointer { Route.find($0) }
        guard let (index, idRange) = found else { return nil }
        self.index = index
        let utf8 = path.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: idRange.lowerBound)
        id = Substring(utf8[start..<utf8.index(start, offsetBy: idRange.count)])
    }

    /// The first entry whose template matches, and the byte range of its `{id}` (empty if none).
    private static func find(_ path: UnsafeBufferPointer<UInt8>) -> (Int, Range<Int>)? {
        let entries = RouteTable.entries
        for index in entries.indices {
            let id = entries[index].pattern.withUnsafeBufferPointer { match(path, $0) }
            if let id { return (index, id) }
        }
        return nil
    }

    /// Whether `path` fits `pattern`, where `{…}` in the pattern stands for one non-empty segment
    /// (no `/`): the range of that segment, an empty range when the pattern has none, or nil.
    private static func match(_ path: UnsafeBufferPointer<UInt8>, _ pattern: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var id = 0..<0
        var p = 0
        var i = 0
        while p < pattern.count {
            if pattern[p] == UInt8(ascii: "{") {
                let start = i
                while i < path.count, path[i] != UInt8(ascii: "/") { i += 1 }
                guard i > start else { return nil }
                id = start..<i
                while p < pattern.count, pattern[p] != UInt8(ascii: "}") { p += 1 }
                p += 1
                continue
            }
            guard i < path.count, path[i] == pattern[p] else { return nil }
            i += 1
            p += 1
        }
        return i == path.count ? id : nil
    }
}
