#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTPServer
import Locking
import SessionStore
import SheetCore
import SheetJSON

/// Sees every request complete: counts it for `/metrics` and writes its log line.
public final class ServiceObserver: Sendable {
    public enum LogFormat: String, Sendable, CaseIterable { case text, json }
    /// `info` logs every request; `warn` only 4xx and 5xx; `error` only 5xx and server faults; `off` nothing;
    /// `debug` also clients that left mid-exchange (`debug(_:)`).
    public enum LogLevel: String, Sendable, CaseIterable, Comparable {
        case debug, info, warn, error, off
        /// The order of the cases (a switch: `allCases.firstIndex` took two searches a request).
        var rank: Int {
            switch self {
            case .debug: 0
            case .info: 1
            case .warn: 2
            case .error: 3
            case .off: 4
            }
        }
        public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
    }

    package let metrics: Metrics
    package let format: LogFormat
    package let level: LogLevel
    /// The HTTP server's own figures, read at scrape time (the server is made after the service).
    private let serverSource = LockedValue<(@Sendable () -> ServerFigures)?>(nil)
    package let startTime: Double
    package let log: LogSink

    /// `routes` are the service's route templates in the order of its table and `methods` the
    /// methods it routes: the label sets of the request metrics.
    public init(routes: [String], methods: [String], format: LogFormat = .text, level: LogLevel = .info,
                log: LogSink = .standardError) {
        metrics = Metrics(routes: routes, methods: methods)
        self.format = format
        self.level = level
        self.log = log
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        startTime = Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    /// What the HTTP layer counts, for `/metrics`.
    public struct ServerFigures: Sendable {
        public var openConnections: Int
        /// Requests whose connection was suspended while they waited (see `HTTPServer.requestSuspensions`).
        public var requestSuspensions: UInt64

        public init(openConnections: Int, requestSuspensions: UInt64) {
            self.openConnections = openConnections
            self.requestSuspensions = requestSuspensions
        }
    }

    public func readServerFigures(from source: @escaping @Sendable () -> ServerFigures) {
        serverSource.withLock { $0 = source }
    }

    package var serverFigures: ServerFigures {
        serverSource.withLock { $0 }?() ?? ServerFigures(openConnections: 0, requestSuspensions: 0)
    }

    /// `tenant` is asked only when the line is written (it may hash the request's key).
    /// `route` is the matched route's index in the table and `template` its path pattern.
    package func completed(_ record: HTTPExchangeRecord, route: Int?, template: String?, tenant: () -> String) {
        let seconds = record.seconds
        let needed: LogLevel = record.status >= 500 ? .error : record.status >= 400 ? .warn : .info
        metrics.recordRequest(route: route, method: record.head.method.rawValue, status: record.status, seconds: seconds)
        guard needed >= level, level != .off else { return }
        log.write(line(record, route: template, tenant: tenant(), seconds: seconds))
    }

    /// A fault of the server itself (not of a request): always logged unless logging is off.
    public func serverError(_ message: String) {
        guard level != .off else { return }
        event(message, level: .error)
    }

    /// A line that matters only when tracing what clients do (one that left mid-exchange).
    public func debug(_ message: String) {
        guard level <= .debug else { return }
        event(message, level: .debug)
    }

    public func info(_ message: String) {
        guard level <= .info else { return }
        event(message, level: .info)
    }

    /// A line about the server (not a request), in the configured format.
    private func event(_ message: String, level: LogLevel) {
        switch format {
        case .text:
            log.write("\(Self.now()) \(level == .error ? "ERROR " : "")\(message)\n")
        case .json:
            var writer = JSONWriter(capacity: 128)
            writer.beginObject()
            writer.key("time"); writer.string(Self.now())
            writer.key("level"); writer.string(level.rawValue)
            writer.key("message"); writer.string(message)
            writer.endObject()
            log.write(String(decoding: writer.bytes, as: UTF8.self) + "\n")
        }
    }

    /// One request's line: the tenant names the caller; no key or Authorization header is ever written.
    private func line(_ record: HTTPExchangeRecord, route: String?, tenant: String, seconds: Double) -> String {
        let requestID = record.responseHeaders["X-Request-Id"] ?? "-"
        switch format {
        case .text:
            let millis = (seconds * 1000 * 1000).rounded() / 1000
            let interrupted = record.completedNormally ? "" : " (client gone)"
            return "\(Self.now()) \(requestID) \(record.head.method.rawValue) \(record.head.path) \(record.status) tenant=\(tenant) \(millis)ms\(interrupted)\n"
        case .json:
            var writer = JSONWriter(capacity: 256)
            writer.beginObject()
            writer.key("time"); writer.string(Self.now())
            writer.key("requestId"); writer.string(requestID)
            writer.key("method"); writer.string(record.head.method.rawValue)
            writer.key("route")
            if let route { writer.string(route) } else { writer.null() }
            writer.key("path"); writer.string(record.head.path)
            writer.key("status"); writer.integer(record.status)
            writer.key("durationMicros"); writer.integer(Int64(seconds * 1_000_000))
            writer.key("bytesIn"); writer.integer(record.bytesIn)
            writer.key("bytesOut"); writer.integer(record.bytesOut)
            writer.key("client"); writer.string(record.head.clientAddress)
            writer.key("tenant"); writer.string(tenant)
            writer.key("completed"); writer.bool(record.completedNormally)
            writer.endObject()
            return String(decoding: writer.bytes, as: UTF8.self) + "\n"
        }
    }

    package static func now() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(millisecondsSince1970: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000).rfc3339
    }
}

/// Where log lines go: standard error in service, a buffer in tests.
public struct LogSink: Sendable {
    public let write: @Sendable (String) -> Void

    public init(write: @escaping @Sendable (String) -> Void) {
        self.write = write
    }

    /// One `write(2)` per line, so lines from different threads never interleave.
    public static let standardError = LogSink { line in
        var line = line
        line.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }
}
