#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Timekeeping

public struct HTTPServerConfiguration: Sendable {
    /// IPv4 or IPv6 literal, or "0.0.0.0" / "::" ("::" also accepts IPv4).
    public var host: String = "127.0.0.1"
    /// 0: a free port (read it from `start()` / `boundPort`).
    public var port: Int = 8080
    /// libmicrohttpd thread pool size (epoll).
    public var threads: Int = 2
    /// Idle / slowloris cut-off: from the moment a connection is ready for a request (accepted,
    /// or its previous exchange over), the whole next request must arrive within this, on `clock`.
    public var connectionTimeout: Duration = .seconds(30)
    /// libmicrohttpd's own timeout, in whole seconds of real time: a connection with no traffic
    /// either way for this long is closed (what ends an answer whose client stopped reading).
    /// nil: `connectionTimeout`.
    public var inactivityTimeout: Duration?
    /// What the timing rules read: connection cut-offs, suspended-request deadlines, shutdown's
    /// grace. Tests put them on a `ManualClock`.
    public var clock: any ServiceClock = SystemClock()
    public var maxConnections: Int = 10_000
    /// Descriptors the process will still open after `start()`, besides connections (sheetd:
    /// libdispatch's timerfds). `start()` fails when the open-file limit leaves no descriptor for
    /// a connection beside them.
    public var descriptorsKeptFree: Int = 0
    public var maxConnectionsPerClient: Int = 2_000
    /// Per-connection memory pool; bounds the request head: libmicrohttpd itself answers
    /// 431 (headers) or 414 (request line) when the head does not fit. libmicrohttpd clears the
    /// whole pool between two requests of a keep-alive connection, so its size is paid on every
    /// request: 8 KiB still holds a head at the header-count limit with long values, and costs
    /// a third of what 16 KiB does.
    public var connectionMemoryLimit: Int = 12 * 1024
    public var maxBodySize: Int = 64 * 1024
    public var maxHeaderCount: Int = 100
    /// SO_SNDBUF for streaming answers.
    public var streamSendBufferSize: Int = 16 * 1024
    /// A responder that takes longer gets `deadlineExceeded` (503 by default): nothing hangs.
    public var suspendedRequestDeadline: Duration = .seconds(60)
    /// Where libmicrohttpd's own error messages and the server's internal errors go.
    /// Default (nil): one line each on standard error.
    public var errorLog: (@Sendable (String) -> Void)?
    /// Where libmicrohttpd's lines that only say a client left mid-exchange go (a socket closed
    /// or reset under a request or an answer; see `LibraryLogLine`): not faults of the server.
    /// Default (nil): nowhere.
    public var departureLog: (@Sendable (String) -> Void)?
    /// Where the server's notices go: what an operator may want to know that is no fault (a
    /// shutdown that stopped the daemon with connections still open). Default (nil): one line
    /// each on standard error.
    public var noticeLog: (@Sendable (String) -> Void)?
    /// listen(2) backlog (added to the contract).
    public var listenBacklog: Int = 1024
    /// HTTPS through libmicrohttpd's own TLS (GnuTLS) when set; plain HTTP when nil.
    public var tls: TLSCredentials?
    /// Lingering close: after answering a request before reading all of it, the server keeps
    /// reading and dropping what the client still sends, for at most this long and this many
    /// bytes, before it closes the socket (so the client can read the answer; see `SocketWatcher`).
    /// The time runs on `clock`.
    public var lingerTime: Duration = .seconds(5)
    public var lingerBytes: Int = 16 << 20
    /// At most this many sockets linger at once; past it, sockets close at once.
    public var maxLingeringConnections: Int = 1024

    public init() {}
}

/// The default error sink: one line on standard error.
func writeToStandardError(_ line: String) {
    var text = line
    text.append("\n")
    text.withCString { pointer in
        _ = write(2, pointer, strlen(pointer))
    }
}

/// A certificate (chain) and its private key, both PEM text, for `HTTPServerConfiguration.tls`.
public struct TLSCredentials: Sendable {
    public var certificatePEM: String
    public var privateKeyPEM: String

    public init(certificatePEM: String, privateKeyPEM: String) {
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
    }
}
