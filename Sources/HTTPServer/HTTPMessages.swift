/// An HTTP request method ("GET", "POST", ...). Any token is allowed.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let get = HTTPMethod(rawValue: "GET")
    public static let post = HTTPMethod(rawValue: "POST")
    public static let put = HTTPMethod(rawValue: "PUT")
    public static let delete = HTTPMethod(rawValue: "DELETE")
    public static let head = HTTPMethod(rawValue: "HEAD")
    public static let options = HTTPMethod(rawValue: "OPTIONS")
    public static let patch = HTTPMethod(rawValue: "PATCH")

    public var description: String { rawValue }
}

/// The head of a request, known on libmicrohttpd's first call (before the body).
public struct HTTPRequestHead: Sendable {
    public var method: HTTPMethod
    /// Decoded path, without query ("/sessions/abc/drag").
    public var path: String
    /// Decoded query arguments, in order. An argument without "=" has the value "".
    public var query: [(String, String)]
    public var headers: HTTPHeaders
    /// "127.0.0.1" / "::1" (no port). IPv4 clients of a dual-stack socket appear as IPv4.
    public var clientAddress: String
    /// What the responder's `preflight` made of the request, as a number of its own (sheetd: the
    /// index of its route), carried to its later calls and to the exchange record so that the
    /// request is classified once. -1 until set; the HTTP layer never reads it.
    public var tag = -1

    public init(
        method: HTTPMethod,
        path: String,
        query: [(String, String)] = [],
        headers: HTTPHeaders = HTTPHeaders(),
        clientAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.clientAddress = clientAddress
    }

    /// The first value of query argument `name` (exact match).
    public func queryValue(_ name: String) -> String? {
        for (key, value) in query where key == name { return value }
        return nil
    }
}

public struct HTTPRequest: Sendable {
    public var head: HTTPRequestHead
    /// The complete body (possibly empty).
    public var body: [UInt8]

    public init(head: HTTPRequestHead, body: [UInt8] = []) {
        self.head = head
        self.body = body
    }
}

public struct HTTPResponse: Sendable {
    public enum Body: Sendable {
        case bytes([UInt8])
        /// Chunked, unknown length (Server-Sent Events).
        case stream(HTTPStream)
    }

    public var status: Int
    /// The server adds nothing but what libmicrohttpd adds (Date, Content-Length / chunked).
    public var headers: HTTPHeaders
    public var body: Body

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why the HTTP layer refused a request before the application saw it. The application turns
/// each into its own error answer (`HTTPResponder.rejection(_:head:)`).
public enum HTTPRejection: Sendable, Hashable {
    /// Content-Length over the limit (refused without reading), or a chunked body that grows past it.
    case payloadTooLarge(limit: Int)
    /// More header lines than allowed: the application answers 431.
    case tooManyHeaders(limit: Int)
    /// Shutting down (also: a responder that overran `suspendedRequestDeadline`, unless the
    /// responder overrides `deadlineExceeded(_:)`).
    case serviceUnavailable
    /// The body's length is ambiguous: `Content-Length` more than once, or together with
    /// `Transfer-Encoding`. A proxy in front could read such a request differently (request
    /// smuggling), so it is refused (RFC 9112 §6.3: 400) and the connection closed after the
    /// answer. libmicrohttpd itself accepts both shapes.
    case ambiguousLength
    /// A header field the server refuses (400, connection closed): whitespace between a field
    /// name and its colon (RFC 9112 §5.1: `Content-Length : 5` would otherwise be read as another
    /// field, and its body as the next request), a control character such as NUL in a value
    /// (RFC 9110 §5.5), or an HTTP/1.1 request without exactly one `Host` (RFC 9112 §3.2).
    case invalidHeader(name: String, problem: HeaderProblem)
    /// The request line and headers outgrow the connection's memory
    /// (`HTTPServerConfiguration.connectionMemoryLimit`): 431, as above.
    case headTooLarge

    /// Whether nothing after the refused request on its connection can be trusted to be a
    /// request: its framing is unknown or its head was malformed.
    public var closesConnection: Bool {
        switch self {
        case .ambiguousLength, .invalidHeader, .headTooLarge: true
        case .payloadTooLarge, .tooManyHeaders, .serviceUnavailable: false
        }
    }
}

/// What is wrong with a header field the server refuses.
public enum HeaderProblem: Sendable, Hashable {
    /// The name is empty or holds whitespace or a control character.
    case invalidName
    /// The value holds a control character other than a tab (NUL, CR, LF, ...).
    case controlCharacterInValue
    /// The value is not what the field allows (a `Content-Length` that is not digits).
    case invalidValue
    /// A field the request must carry is absent (`Host` in HTTP/1.1).
    case missing
    /// A field allowed once is repeated (`Host`).
    case repeated
}

/// One finished exchange, for logs and metrics.
public struct HTTPExchangeRecord: Sendable {
    public var head: HTTPRequestHead
    /// The status of the answer that was queued; 0 when none was (the client went away first).
    public var status: Int
    public var bytesIn: Int
    /// Body bytes of the answer (for streams: bytes handed to libmicrohttpd).
    public var bytesOut: Int
    /// Monotonic time from the head's arrival to the end of the exchange. (Nanoseconds, not
    /// `ContinuousClock` instants: turning a `Duration` into seconds is Int128 arithmetic, once
    /// per request.)
    public var elapsedNanoseconds: Int64
    /// False when the client went away / timeout / error.
    public var completedNormally: Bool
    /// The headers of the answer that was queued (empty when none was).
    public var responseHeaders: HTTPHeaders

    /// `elapsedNanoseconds` in seconds.
    public var seconds: Double { Double(elapsedNanoseconds) / 1e9 }

    public init(
        head: HTTPRequestHead, status: Int, bytesIn: Int, bytesOut: Int,
        elapsedNanoseconds: Int64, completedNormally: Bool,
        responseHeaders: HTTPHeaders = HTTPHeaders()
    ) {
        self.responseHeaders = responseHeaders
        self.head = head
        self.status = status
        self.bytesIn = bytesIn
        self.bytesOut = bytesOut
        self.elapsedNanoseconds = elapsedNanoseconds
        self.completedNormally = completedNormally
    }
}
