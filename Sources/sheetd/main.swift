import AccessControl
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTPServer
import Locking
import PostgresStore
import SQLiteArchive
import SessionStore
import SheetAPI
import SheetObservability

// Wiring only: flags, signals, and the order things start and stop in.

// First, on the main thread and before any other thread exists: block the stop signals, so every
// thread inherits the mask and only SignalWaiter's sigwait thread ever receives them.
SignalWaiter.block([SIGINT, SIGTERM, SIGHUP])

if CommandLine.arguments.count > 1 && CommandLine.arguments[1] == "keys" {
    exit(KeysCommand.run(CommandLine.arguments.dropFirst(2)))
}

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

if let url = options.check { exit(HealthCheck.run(url, tls: options.tlsCertificate != nil)) }

Service.run(options)

/// Start-up and shutdown, in the order they must happen.
enum Service {
    /// How long past the grace a stop may take (the 503s going out, the daemon's threads
    /// joined, the last commit) before sheetd gives up on a clean stop and exits.
    static let shutdownMargin: Duration = .seconds(15)

    static func run(_ options: Options) -> Never {
        signal(SIGPIPE, SIG_IGN)

        let observer = ServiceObserver(
            format: ServiceObserver.LogFormat(rawValue: options.logFormat) ?? .text,
            level: ServiceObserver.LogLevel(rawValue: options.logLevel) ?? .info)

        var storeConfiguration = SessionStore.Configuration()
        storeConfiguration.maxSessions = options.maxSessions
        storeConfiguration.maxSessionsPerTenant = options.maxSessionsPerTenant
        storeConfiguration.sessionTTL = options.sessionTTL
        storeConfiguration.idempotencyCapacity = options.idempotencyKeys
        let store: any SessionStoring
        if let database = options.database {
            store = databaseStore(database, options, observer: observer)
        } else {
            store = restoringStore(storeConfiguration, options, observer: observer)
        }
        let keyRing = options.authKeys.map { path in KeyRing(loadKeys(path, startingUp: true) ?? []) }
        var serviceConfiguration = SheetService.Configuration()
        serviceConfiguration.streamKeepAlive = options.streamKeepAlive
        let service = SheetService(store: store, configuration: serviceConfiguration, observer: observer,
                                   access: accessPolicy(options, keyRing: keyRing))

        var httpConfiguration = HTTPServerConfiguration()
        httpConfiguration.host = options.host
        httpConfiguration.port = options.port
        httpConfiguration.threads = options.threads
        httpConfiguration.connectionTimeout = options.idleTimeout
        httpConfiguration.maxConnections = options.maxConnections
        httpConfiguration.descriptorsKeptFree = DescriptorBudget.timerDescriptors
        httpConfiguration.maxConnectionsPerClient = options.maxConnectionsPerClient
        httpConfiguration.errorLog = { observer.serverError($0) }
        httpConfiguration.departureLog = { observer.debug($0) }
        httpConfiguration.noticeLog = { observer.info($0) }
        httpConfiguration.tls = tlsCredentials(options)
        let server = HTTPServer(configuration: httpConfiguration, responder: service)
        observer.readServerFigures {
            ServiceObserver.ServerFigures(openConnections: server.openConnections, requestSuspensions: server.requestSuspensions)
        }

        guard DescriptorBudget.takeEventLoopDescriptors() else {
            printError("the open-file limit (ulimit -n \(OpenFileLimit.current)) leaves no room for the descriptors sheetd's timers need: raise it")
            exit(1)
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
        printError("listening on \(options.tlsCertificate == nil ? "http" : "https")://\(shownHost):\(port)")
        if let keyRing {
            printError("API keys: \(keyRing.count) from \(options.authKeys ?? ""), tenants \(keyRing.tenants.sorted().joined(separator: ", "))")
        } else if !options.allowUnauthenticated {
            printError("protected mode: no --auth-keys, so only loopback clients are served (see --help)")
        }

        // The idle sweep: a tenth of the TTL between passes (at most a minute), each pass in small slices.
        let sweeper = Task.detached { await store.runIdleSweeps() }
        let heapTrimmer = Task.detached { await HeapTrimming.run(every: .seconds(10)) }

        // The main thread takes the signals itself (blocked everywhere, so sigwait gets them):
        // SIGHUP re-reads the keys file, SIGINT and SIGTERM stop.
        var received = SignalWaiter.wait([SIGINT, SIGTERM, SIGHUP])
        while received == SIGHUP {
            if let keyRing, let path = options.authKeys {
                if let entries = loadKeys(path, startingUp: false) {
                    keyRing.replace(with: entries)
                    observer.info("SIGHUP: \(entries.count) API keys loaded from \(path)")
                } else {
                    observer.serverError("SIGHUP: \(path) not loaded; the \(keyRing.count) keys in use stay")
                }
            } else {
                observer.info("SIGHUP ignored: no --auth-keys file to re-read")
            }
            received = SignalWaiter.wait([SIGINT, SIGTERM, SIGHUP])
        }
        observer.info("received \(received == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
        let stopped = DispatchSemaphore(value: 0)
        let grace = options.shutdownGrace
        let cleanly = LockedValue(true)
        Task {
            // The reverse of the start, each step awaited: the sweeper (a pass in progress ends
            // first), then long-polls and streams (they would otherwise run out the grace), then
            // the server drains, then the store commits what is left and closes the archive.
            sweeper.cancel()
            await sweeper.value
            heapTrimmer.cancel()
            await store.shutdown()
            if !(await server.shutdown(grace: grace)) { cleanly.withLock { $0 = false } }
            do { try await store.close() } catch {
                observer.serverError("closing the store: \(error)")
                cleanly.withLock { $0 = false }
            }
            stopped.signal()
        }
        // A stop that hangs (a commit that never returns, a connection that stays suspended)
        // must not leave the process half alive: after the grace and a margin, exit and say so.
        let limit = grace + Self.shutdownMargin
        if stopped.wait(timeout: .now() + .nanoseconds(Int(limit.components.seconds) * 1_000_000_000
                                                       + Int(limit.components.attoseconds / 1_000_000_000))) == .timedOut {
            observer.serverError("shutdown did not finish within \(limit): exiting with status 1 without a clean stop")
            exit(1)
        }
        guard cleanly.withLock({ $0 }) else {
            observer.serverError("shutdown was not clean (see above): exiting with status 1")
            exit(1)
        }
        observer.info("stopped")
        exit(0)
    }

    /// The keys file's entries. A file that cannot be read or has a mistake stops start-up
    /// (naming the line); on a reload it is reported and nil is returned.
    static func loadKeys(_ path: String, startingUp: Bool) -> [KeyEntry]? {
        do {
            return try KeyFile.parse(try readFile(path))
        } catch let error as KeyFileError {
            printError("--auth-keys \(path): \(error.description)")
        } catch {
            printError("--auth-keys \(path): \(error)")
        }
        if startingUp { exit(2) }
        return nil
    }

    static func accessPolicy(_ options: Options, keyRing: KeyRing?) -> AccessPolicy {
        var policy = AccessPolicy()
        if let keyRing {
            policy.callers = .keys(keyRing)
        } else {
            policy.callers = options.allowUnauthenticated ? .anyone : .loopback
        }
        if options.rateLimit > 0 { policy.rateLimiter = RateLimiter(requestsPerSecond: options.rateLimit) }
        policy.corsOrigins = options.corsOrigins
        return policy
    }

    /// The PEM files of --tls-cert and --tls-key; one that cannot be read stops start-up.
    static func tlsCredentials(_ options: Options) -> TLSCredentials? {
        guard let certificate = options.tlsCertificate, let key = options.tlsKey else { return nil }
        do {
            return TLSCredentials(certificatePEM: try readFile(certificate), privateKeyPEM: try readFile(key))
        } catch {
            printError("\(error)")
            exit(2)
        }
    }

    /// The store of `--database`: sessions in PostgreSQL, shared with every other instance given
    /// the same URL. A database that cannot be reached or has a newer schema stops start-up.
    static func databaseStore(_ url: String, _ options: Options, observer: ServiceObserver) -> PostgresStore {
        var configuration = PostgresStore.Configuration(url: url)
        configuration.maxSessions = options.maxSessions
        configuration.maxSessionsPerTenant = options.maxSessionsPerTenant
        configuration.sessionTTL = options.sessionTTL
        configuration.idempotencyCapacity = options.idempotencyKeys
        configuration.report = { observer.serverError($0) }
        do {
            let store = try PostgresStore.open(configuration)
            printError("data: PostgreSQL at \(PostgresStore.redacted(url)) (shared by every sheetd given it)")
            return store
        } catch {
            printError(error.message)
            exit(1)
        }
    }

    /// The store, carrying on from what the archive holds. A durable store answers at once and
    /// reads the file on a thread of its own meanwhile (a million sessions take seconds): calls
    /// that need sessions wait until all are read (`SessionStore.awaitingRestore`). A file sheetd
    /// must not use (newer, foreign, damaged, locked) stops start-up before it listens; one whose
    /// rows cannot be read back stops the process when the read reaches them.
    static func restoringStore(_ configuration: SessionStore.Configuration, _ options: Options,
                               observer: ServiceObserver) -> SessionStore {
        if options.memory {
            printError("sessions are kept in memory only (--memory): they are lost when sheetd stops")
            return SessionStore(configuration: configuration, archive: VolatileArchive())
        }
        var archiveOptions = SQLiteArchive.Options()
        archiveOptions.synchronous = SQLiteArchive.Synchronous(rawValue: options.sync) ?? .normal
        archiveOptions.housekeepingFailed = { observer.serverError($0) }
        let archive: SQLiteArchive
        do {
            archive = try SQLiteArchive.open(directory: options.dataDirectory, options: archiveOptions)
        } catch {
            printError(error.message)
            exit(1)
        }
        printError("data: \(archive.path) (SQLite WAL, synchronous=\(options.sync)): reading it while serving")
        let store = SessionStore.awaitingRestore(configuration: configuration, archive: archive)
        // A queue of its own, not the cooperative pool: the read blocks its thread for seconds.
        DispatchQueue(label: "sheetd-restore").async {
            let started = ContinuousClock.now
            let read = readInto(store, from: archive)
            // The file's contents were copied into the store and are gone: give their memory
            // back, so RSS after a restart is what the sessions take.
            SQLiteArchive.returnFreeHeapMemory()
            printError("data: \(read.sessions) sessions, \(read.keys) idempotency keys read in \(ContinuousClock.now - started)")
        }
        return store
    }

    /// Reads the whole archive and hands it to `store`, returning once the store holds it and
    /// the read's temporary storage is released (the handover box is emptied by the one taking
    /// it). A file whose rows cannot be read back stops the process.
    static func readInto(_ store: SessionStore, from archive: SQLiteArchive) -> (sessions: Int, keys: Int) {
        let handover: LockedValue<ArchiveContents?>
        do {
            handover = LockedValue(try archive.load())
        } catch {
            printError(error.message)
            exit(1)
        }
        let read = handover.withLock { ($0?.sessions.count ?? 0, $0?.keys.count ?? 0) }
        let done = DispatchSemaphore(value: 0)
        Task {
            await store.restore(handover.withLock { contents in
                defer { contents = nil }
                return contents ?? ArchiveContents()
            })
            done.signal()
        }
        done.wait()
        return read
    }
}


struct FileReadError: Error, CustomStringConvertible {
    let description: String
}

/// A whole (small) file as text.
func readFile(_ path: String) throws(FileReadError) -> String {
    guard let file = fopen(path, "rb") else {
        throw FileReadError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
    }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count <= 0 { break }
        bytes += buffer[0..<count]
        if bytes.count > 16 << 20 { throw FileReadError(description: "\(path) is larger than 16 MiB") }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Gives the heap's free memory back to the system now and then. Under churn glibc's per-thread
/// arenas keep what sessions, answers and connections freed: in a soak of create/drag/delete
/// cycles the live heap fell from 21.1 to 15.5 MB between the first minute and the fourth while
/// the arenas grew from 25.9 to 29.9 MB, and RSS with them; one `malloc_trim` then took RSS from
/// 53.8 to 45.8 MB. Every 30 s was not often enough: a burst after a stall left RSS at 84.7 MB with
/// 19.7 MB in use until the next trim took it to 55.9 MB, and the creep between two trims was
/// about 10%; every 10 s bounds both. The trim runs on a queue of its own: with a large heap it takes milliseconds,
/// too long for a thread of the cooperative pool.
enum HeapTrimming {
    static func run(every interval: Duration) async {
        let queue = DispatchQueue(label: "sheetd-heap-trim")
        while true {
            do { try await Task.sleep(for: interval) } catch { return }   // cancelled: stopping
            queue.async { SQLiteArchive.returnFreeHeapMemory() }
        }
    }
}
