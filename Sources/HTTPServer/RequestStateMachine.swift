/// The life cycle of one request as libmicrohttpd's access handler sees it, as a pure value:
/// each event returns the action the bridge must take. It knows nothing of sockets or
/// libmicrohttpd, so it is unit-tested on its own.
///
///     head ──headReceived──▶ readingBody ──bodyChunk*──▶ readingBody ──requestComplete──▶ awaitingAnswer
///       │ (reject / preflight)     │ (chunked body past the limit)                           │ resumed
///       ▼                          ▼                                                          ▼
///    answered ◀──requestComplete── discardingBody                                answered (queue it)
struct RequestStateMachine: Sendable {
    struct Limits: Sendable, Equatable {
        var maxBodySize: Int
        var maxHeaderCount: Int
        /// How many bytes of an over-limit chunked body are read and thrown away so that the
        /// client can get its 413 (libmicrohttpd cannot answer in the middle of an upload);
        /// past this the connection is closed without an answer.
        var maxDiscardedBytes: Int
    }

    enum State: Sendable, Equatable {
        case head
        case readingBody(received: Int)
        case discardingBody(received: Int)
        case awaitingAnswer
        case answered
        case failed
    }

    enum HeadAction: Sendable, Equatable {
        /// Keep reading; ask the responder's preflight.
        case proceed
        /// Queue the responder's answer for this refusal now (first call).
        case reject(HTTPRejection)
    }

    enum ChunkAction: Sendable, Equatable {
        case append
        case discard
        /// Close the connection without an answer (MHD_Result.NO).
        case abort
    }

    enum CompleteAction: Sendable, Equatable {
        /// Suspend the connection and run the responder.
        case respond
        /// Queue the responder's answer for this refusal (the body was drained).
        case reject(HTTPRejection)
        /// The call after the resume: queue the stored answer.
        case queueAnswer
        /// A call libmicrohttpd should not make in this state: close the connection.
        case abort
    }

    let limits: Limits
    private(set) var state: State = .head

    init(limits: Limits) { self.limits = limits }

    /// The first call: headers are in.
    /// `ambiguousLength`: `Content-Length` was sent more than once, or with `Transfer-Encoding`.
    /// `refusal`: a header the server refuses (`HTTPRejection.invalidHeader`), found while reading the head.
    mutating func headReceived(
        headerCount: Int, contentLength: Int?, ambiguousLength: Bool = false, refusal: HTTPRejection? = nil, shuttingDown: Bool
    ) -> HeadAction {
        guard case .head = state else {
            state = .failed
            return .reject(.serviceUnavailable)
        }
        if shuttingDown {
            state = .answered
            return .reject(.serviceUnavailable)
        }
        if let refusal {
            state = .answered
            return .reject(refusal)
        }
        if ambiguousLength {
            state = .answered
            return .reject(.ambiguousLength)
        }
        if headerCount > limits.maxHeaderCount {
            state = .answered
            return .reject(.tooManyHeaders(limit: limits.maxHeaderCount))
        }
        if let contentLength, contentLength > limits.maxBodySize {
            state = .answered
            return .reject(.payloadTooLarge(limit: limits.maxBodySize))
        }
        state = .readingBody(received: 0)
        return .proceed
    }

    /// An early answer (preflight) was queued on the first call.
    mutating func answeredEarly() {
        state = .answered
    }

    /// A body chunk of `count` bytes arrived.
    mutating func bodyChunk(count: Int) -> ChunkAction {
        switch state {
        case .readingBody(let received):
            let total = received + count
            if total > limits.maxBodySize {
                state = .discardingBody(received: total)
                return .discard
            }
            state = .readingBody(received: total)
            return .append
        case .discardingBody(let received):
            let total = received + count
            if total - limits.maxBodySize > limits.maxDiscardedBytes {
                state = .failed
                return .abort
            }
            state = .discardingBody(received: total)
            return .discard
        case .answered:
            // An early answer was queued; libmicrohttpd discards the rest itself.
            return .discard
        case .head, .awaitingAnswer, .failed:
            state = .failed
            return .abort
        }
    }

    /// A call with no upload data after the head: the body is complete, or (when awaiting) the
    /// connection was resumed.
    mutating func requestComplete() -> CompleteAction {
        switch state {
        case .readingBody:
            state = .awaitingAnswer
            return .respond
        case .discardingBody:
            state = .answered
            return .reject(.payloadTooLarge(limit: limits.maxBodySize))
        case .awaitingAnswer:
            state = .answered
            return .queueAnswer
        case .head, .answered, .failed:
            state = .failed
            return .abort
        }
    }

    /// The final call answered the request itself, without suspending (`respondInPlace`).
    mutating func answeredInPlace() {
        guard case .awaitingAnswer = state else {
            state = .failed
            return
        }
        state = .answered
    }

    /// The responder's answer could not be queued, or the request was refused while suspended.
    mutating func fail() { state = .failed }

    var isAwaitingAnswer: Bool { state == .awaitingAnswer }
}
