import Dispatch
import Glibc
import HTTPServer
import SQLiteArchive
import SessionStore
import SheetAPI

// Wiring only: flags, signals, and the order things start and stop in.

// First, on the main thread and before any other thread exists: block the stop signals, so every
// thread inherits the mask and only SignalWaiter's sigwait thread ever receives them.
SignalWaiter.block([SIGINT, SIGTERM])

let options: Options
do {
    if CommandLine.arguments.contains("--help") || CommandLine.arguments.contains("-h") {
        print(Options.usage, terminator: "")
        exit(0)
    }
    var environment: [String: String] = [:]
    var cursor = environ
    while let entry = cursor.pointee {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "=") {
            environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        cursor += 1
    }
    options = try Options.parse(CommandLine.arguments, environment: environment)
} catch {
    printError(error.message)
    exit(2)
}

if let url = options.check { exit(HealthCheck.run(url)) }

Service.run(options)

/// Start-up and shutdown, in the order they must happen.
enum Service {
    static func run(_ options: Options) -> Never {
        signal(SIGPIPE, SIG_IGN)

        let observer = ServiceObserver(
            format: ServiceObserver.LogFormat(rawValue: options.logFormat) ?? .text,
            level: ServiceObserver.LogLevel(rawValue: options.logLevel) ?? .info)

        var storeConfiguration = SessionStore.Configuration()
        storeConfiguration.maxSessions = options.maxSessions
        storeConfiguration.sessionTTL = options.sessionTTL
        storeConfiguration.idempotencyCapacity = options.idempotencyKeys
        let (archive, contents) = openArchive(options)
        let store = SessionStore(configuration: storeConfiguration, archive: archive, restoring: contents)
        let service = SheetService(store: store, observer: observer)

        var httpConfiguration = HTTPServerConfiguration()
        httpConfiguration.host = options.host
        httpConfiguration.port = options.port
        httpConfiguration.threads = options.threads
        httpConfiguration.connectionTimeout = options.idleTimeout
        httpConfiguration.maxConnections = options.maxConnections
        httpConfiguration.maxConnectionsPerClient = options.maxConnectionsPerClient
        httpConfiguration.errorLog = { observer.serverError($0) }
        let server = HTTPServer(configuration: httpConfiguration, responder: service)
        observer.readServerFigures {
            ServiceObserver.ServerFigures(openConnections: server.openConnections, requestSuspensions: server.requestSuspensions)
        }

        let port: Int
        do {
            port = try server.start()
        } catch {
            printError("cannot listen on \(options.host):\(options.port): \(error.message)")
            exit(1)
        }
        let shownHost = options.host.contains(":") ? "[\(options.host)]" : options.host
        // The one line scripts wait for; written directly so it appears whatever the log level.
        printError("listening on http://\(shownHost):\(port)")

        // The idle sweep: a tenth of the TTL between passes (at most a minute), each pass in small slices.
        let ttl = options.sessionTTL
        let sweeper = Task.detached {
            let interval = min(max(ttl / 10, .milliseconds(100)), .seconds(60))
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                await store.sweepIdleSessions()
            }
        }

        // The main thread takes the stop signal itself (blocked everywhere, so sigwait gets it).
        let received = SignalWaiter.wait([SIGINT, SIGTERM])
        observer.info("received \(received == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
        sweeper.cancel()
        let stopped = DispatchSemaphore(value: 0)
        let grace = options.shutdownGrace
        Task {
            // Long-polls and streams first (they would otherwise run out the grace), then the server drains.
            await store.shutdown()
            await server.shutdown(grace: grace)
            // Every answer has been given; commit what is left (last-access times) and close the file.
            await store.close()
            stopped.signal()
        }
        stopped.wait()
        observer.info("stopped")
        exit(0)
    }

    /// The store's backing: nothing with `--memory`, else the SQLite file in `--data-dir`, read
    /// back in full. A file sheetd must not use (newer, foreign, damaged, locked) stops start-up.
    static func openArchive(_ options: Options) -> (any SessionArchive, ArchiveContents) {
        if options.memory {
            printError("sessions are kept in memory only (--memory): they are lost when sheetd stops")
            return (VolatileArchive(), ArchiveContents())
        }
        var archiveOptions = SQLiteArchive.Options()
        archiveOptions.synchronous = SQLiteArchive.Synchronous(rawValue: options.sync) ?? .normal
        do {
            let archive = try SQLiteArchive.open(directory: options.dataDirectory, options: archiveOptions)
            let contents = try archive.load()
            printError("data: \(archive.path) (SQLite WAL, synchronous=\(options.sync)): \(contents.sessions.count) sessions, \(contents.keys.count) idempotency keys")
            return (archive, contents)
        } catch {
            printError(error.message)
            exit(1)
        }
    }
}
