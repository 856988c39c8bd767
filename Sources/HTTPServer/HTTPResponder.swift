/// The application side of the server.
public protocol HTTPResponder: Sendable {
    /// Called on a libmicrohttpd thread right after the headers, before any body byte is read.
    /// Return an answer only for early refusals (404 route that cannot exist, 405, ...):
    /// answering here closes the connection. What it stores in `tag` comes back as the head's
    /// `tag` in every later call about the request. Must not block. Default: nil.
    func preflight(_ head: HTTPRequestHead, tag: inout Int) -> HTTPResponse?

    /// The request with its full body, answered on the libmicrohttpd thread without a task when
    /// that needs no waiting (`.answered`), or taken on and answered later through `later`, from
    /// whatever thread learns the answer (a store's commit, say), with no task waiting meanwhile
    /// and the connection suspended until then (`.deferred`); `.declined` hands it to
    /// `respond(to:)`. It may do real work (an uncontended actor entered in place) but must not
    /// block, and must give the answer exactly when it returns `.deferred`. Default: `.declined`.
    func respondInPlace(to request: HTTPRequest, later: DeferredAnswer) -> InPlaceAnswer

    /// The request with its full body. Runs in a Swift Task; the connection is suspended meanwhile.
    func respond(to request: HTTPRequest) async -> HTTPResponse

    /// The answer for a refusal made by the HTTP layer itself. Called on a libmicrohttpd thread
    /// (or the server's deadline/shutdown task): must not block.
    func rejection(_ rejection: HTTPRejection, head: HTTPRequestHead) -> HTTPResponse

    /// The answer sent when `respond(to:)` has not finished within
    /// `HTTPServerConfiguration.suspendedRequestDeadline` (its eventual result is dropped).
    /// Default: `rejection(.serviceUnavailable, head:)`. (Added to the contract.)
    func deadlineExceeded(_ head: HTTPRequestHead) -> HTTPResponse

    /// Called once per completed request (answer fully sent or the client went away), for logs
    /// and metrics. It runs on a libmicrohttpd thread right after the exchange: must not block
    /// (hand the record to a queue / task if the work is slow). Default: nothing.
    func completed(_ record: HTTPExchangeRecord)
}

extension HTTPResponder {
    public func preflight(_ head: HTTPRequestHead, tag: inout Int) -> HTTPResponse? { nil }

    public func respondInPlace(to request: HTTPRequest, later: DeferredAnswer) -> InPlaceAnswer { .declined }

    public func rejection(_ rejection: HTTPRejection, head: HTTPRequestHead) -> HTTPResponse {
        HTTPResponse.defaultRejection(rejection)
    }

    public func deadlineExceeded(_ head: HTTPRequestHead) -> HTTPResponse {
        rejection(.serviceUnavailable, head: head)
    }

    public func completed(_ record: HTTPExchangeRecord) {}
}

extension HTTPResponse {
    /// A plain-text answer for a rejection, for responders that do not shape their own.
    public static func defaultRejection(_ rejection: HTTPRejection) -> HTTPResponse {
        let status: Int
        let text: String
        switch rejection {
        case .payloadTooLarge(let limit):
            status = 413
            text = "payload too large (limit \(limit) bytes)\n"
        case .tooManyHeaders(let limit):
            status = 431
            text = "too many header fields (limit \(limit))\n"
        case .serviceUnavailable:
            status = 503
            text = "service unavailable\n"
        case .ambiguousLength:
            status = 400
            text = "ambiguous body length: Content-Length repeated or with Transfer-Encoding\n"
        case .invalidHeader(let name, let problem):
            status = 400
            text = "invalid header field \(name): \(problem)\n"
        case .headTooLarge:
            status = 431
            text = "request head too large\n"
        }
        return HTTPResponse(
            status: status,
            headers: ["Content-Type": "text/plain; charset=utf-8"],
            body: .bytes(Array(text.utf8))
        )
    }
}
