#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The command line and its `SHEETD_*` environment twins. A flag wins over the environment.
struct Options {
    var host = "127.0.0.1"
    var port = 8080
    var threads = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    var maxSessions = 1_000_000
    var sessionTTL: Duration = .seconds(24 * 3600)
    var idleTimeout: Duration = .seconds(30)
    var maxConnections = 10_000
    var maxConnectionsPerClient = 2_000
    var shutdownGrace: Duration = .seconds(10)
    var streamKeepAlive: Duration = .seconds(15)
    var idempotencyKeys = 100_000
    var logFormat = "text"
    var logLevel = "info"
    var memory = false
    var dataDirectory = "sheetd-data"
    /// Whether --data-dir (or SHEETD_DATA_DIR) was given: it cannot go with --database.
    var dataDirectoryGiven = false
    var database: String?
    var sync = "normal"
    var check: String?
    var authKeys: String?
    var allowUnauthenticated = false
    var maxSessionsPerTenant: Int?
    var tlsCertificate: String?
    var tlsKey: String?
    var rateLimit = 0
    var corsOrigins: [String] = []

    struct Flag: Sendable {
        let name: String
        let value: String     // placeholder shown in --help; empty for a switch
        let help: String
        let apply: @Sendable (inout Options, String) throws(UsageError) -> Void
    }

    struct UsageError: Error { let message: String }

    static let flags: [Flag] = [
        Flag(name: "host", value: "ADDRESS", help: "address to listen on (0.0.0.0 or :: for every interface)") { $0.host = $1 },
        Flag(name: "port", value: "PORT", help: "TCP port; 0 takes a free one (default 8080)") { o, v throws(UsageError) in o.port = try integer(v, "port", 0...65535) },
        Flag(name: "threads", value: "N", help: "libmicrohttpd threads (default: one per core)") { o, v throws(UsageError) in o.threads = try integer(v, "threads", 1...256) },
        Flag(name: "max-sessions", value: "N", help: "sessions held at most; creating more answers 503 (default 1000000)") { o, v throws(UsageError) in o.maxSessions = try integer(v, "max-sessions", 1...100_000_000) },
        Flag(name: "session-ttl", value: "DURATION", help: "remove sessions idle this long (default 24h)") { o, v throws(UsageError) in o.sessionTTL = try duration(v, "session-ttl") },
        Flag(name: "idle-timeout", value: "DURATION", help: "close connections idle this long, slow senders too (default 30s)") { o, v throws(UsageError) in o.idleTimeout = try duration(v, "idle-timeout") },
        Flag(name: "max-connections", value: "N", help: "open connections at most (default 10000)") { o, v throws(UsageError) in o.maxConnections = try integer(v, "max-connections", 1...1_000_000) },
        Flag(name: "max-connections-per-client", value: "N", help: "open connections per client address (default 2000)") { o, v throws(UsageError) in o.maxConnectionsPerClient = try integer(v, "max-connections-per-client", 1...1_000_000) },
        Flag(name: "shutdown-grace", value: "DURATION", help: "on SIGTERM, how long requests in flight may finish (default 10s)") { o, v throws(UsageError) in o.shutdownGrace = try duration(v, "shutdown-grace") },
        Flag(name: "stream-keepalive", value: "DURATION", help: "write a comment to an idle event stream this often, so proxies keep it open (default 15s)") { o, v throws(UsageError) in
            o.streamKeepAlive = try duration(v, "stream-keepalive")
            guard o.streamKeepAlive >= .milliseconds(100) else { throw UsageError(message: "--stream-keepalive must be at least 100ms, not \"\(v)\"") }
        },
        Flag(name: "idempotency-keys", value: "N", help: "Idempotency-Key answers remembered, oldest forgotten first (default 100000)") { o, v throws(UsageError) in o.idempotencyKeys = try integer(v, "idempotency-keys", 1...100_000_000) },
        Flag(name: "log-format", value: "text|json", help: "request log format on standard error (default text)") { o, v throws(UsageError) in o.logFormat = try choice(v, "log-format", ["text", "json"]) },
        Flag(name: "log-level", value: "LEVEL", help: "debug (also clients that left mid-exchange)|info (every request)|warn (4xx, 5xx)|error (5xx, faults)|off (default info)") { o, v throws(UsageError) in o.logLevel = try choice(v, "log-level", ["debug", "info", "warn", "error", "off"]) },
        Flag(name: "data-dir", value: "PATH", help: "keep sessions in PATH/sheetd.sqlite3, created if missing (default sheetd-data)") { o, v in
            o.dataDirectory = v
            o.dataDirectoryGiven = true
        },
        Flag(name: "sync", value: "normal|full", help: "normal: what was answered survives a crash of sheetd; full: also a power loss (default normal)") { o, v throws(UsageError) in o.sync = try choice(v, "sync", ["normal", "full"]) },
        Flag(name: "memory", value: "", help: "keep sessions in memory only, no --data-dir: lost when the process stops") { o, _ in o.memory = true },
        Flag(name: "database", value: "URL", help: "keep sessions in PostgreSQL (postgresql://user@host:5432/db), shared by every sheetd given it") { $0.database = $1 },
        Flag(name: "auth-keys", value: "FILE", help: "API keys: lines of \"<tenant> <role> <sha256-hex>\" (see `sheetd keys new`); re-read on SIGHUP") { $0.authKeys = $1 },
        Flag(name: "allow-unauthenticated", value: "", help: "without --auth-keys, serve every address, not only loopback (no key asked)") { o, _ in o.allowUnauthenticated = true },
        Flag(name: "max-sessions-per-tenant", value: "N", help: "sessions one tenant may hold; creating more answers 503 (default: --max-sessions)") { o, v throws(UsageError) in o.maxSessionsPerTenant = try integer(v, "max-sessions-per-tenant", 1...100_000_000) },
        Flag(name: "tls-cert", value: "FILE", help: "serve HTTPS with this PEM certificate (chain); needs --tls-key") { $0.tlsCertificate = $1 },
        Flag(name: "tls-key", value: "FILE", help: "the PEM private key of --tls-cert") { $0.tlsKey = $1 },
        Flag(name: "rate-limit", value: "N", help: "requests per second per key (per client address without keys), bursts of N; 0 is off (default)") { o, v throws(UsageError) in o.rateLimit = try integer(v, "rate-limit", 0...1_000_000) },
        Flag(name: "cors-origin", value: "ORIGIN", help: "let browser pages from ORIGIN (https://app.example) call the API; repeatable") { o, v throws(UsageError) in o.corsOrigins += try origins(v) },
        Flag(name: "check", value: "URL", help: "health check: GET the URL, exit 0 on 200, else 1 (for container HEALTHCHECK)") { $0.check = $1 },
    ]

    static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Options {
        var options = Options()
        for flag in flags where flag.name != "check" {
            let variable = "SHEETD_" + flag.name.uppercased().replacingOccurrences(of: "-", with: "_")
            guard let value = environment[variable], !value.isEmpty else { continue }
            if flag.value.isEmpty {
                if ["1", "true", "yes"].contains(value.lowercased()) { try flag.apply(&options, value) }
            } else {
                try flag.apply(&options, value)
            }
        }
        var index = 1
        while index < arguments.count {
            var argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") else { throw UsageError(message: "unexpected argument \"\(argument)\"") }
            argument.removeFirst(2)
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "=") {
                inlineValue = String(argument[argument.index(after: equals)...])
                argument = String(argument[..<equals])
            }
            guard let flag = flags.first(where: { $0.name == argument }) else {
                throw UsageError(message: "unknown flag --\(argument) (see --help)")
            }
            if flag.value.isEmpty {
                try flag.apply(&options, "")
                continue
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else { throw UsageError(message: "--\(argument) needs a value (\(flag.value))") }
                value = arguments[index]
                index += 1
            }
            try flag.apply(&options, value)
        }
        if (options.tlsCertificate == nil) != (options.tlsKey == nil) {
            throw UsageError(message: "--tls-cert and --tls-key go together: give both (HTTPS) or neither (plain HTTP)")
        }
        if options.database != nil && (options.memory || options.dataDirectoryGiven) {
            throw UsageError(message: "--database keeps sessions in PostgreSQL: it cannot be combined with --\(options.memory ? "memory" : "data-dir")")
        }
        if options.authKeys != nil && options.allowUnauthenticated {
            throw UsageError(message: "--allow-unauthenticated cannot be combined with --auth-keys: with keys, every request needs one")
        }
        return options
    }

    /// One or more (comma-separated) origins, each `scheme://host[:port]` exactly as a browser
    /// sends it in `Origin`; `*` is refused (the API takes credentials).
    private static func origins(_ text: String) throws(UsageError) -> [String] {
        var result: [String] = []
        for origin in text.split(separator: ",").map({ String($0).trimmingSpaces }) where !origin.isEmpty {
            let parts = origin.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == "http:" || parts[0] == "https:", parts[1].isEmpty, !parts[2].isEmpty,
                  parts[2].allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "*" }) else {
                throw UsageError(message: "--cors-origin must be an origin such as https://app.example or http://localhost:3000 (no path, no *), not \"\(origin)\"")
            }
            result.append(origin)
        }
        return result
    }

    static var usage: String {
        var text = """
        sheetd: serves sheet sessions (the state machine of an iOS modal sheet) over HTTP.

        Usage: sheetd [flags]
               sheetd keys new --tenant TENANT --role app|observer|operator

        Every flag can also be set as an environment variable: --max-sessions is SHEETD_MAX_SESSIONS.
        DURATION is a number with a unit: 500ms, 30s, 10m, 24h (a bare number is seconds).

        Flags:

        """
        for flag in flags {
            let left = "  --\(flag.name)" + (flag.value.isEmpty ? "" : " \(flag.value)")
            text += pad(left) + flag.help + "\n"
        }
        text += pad("  --help") + "print this help\n"
        text += "\nSIGINT or SIGTERM stops it gracefully: it stops accepting, finishes what is in flight, exits 0.\n"
        text += "SIGHUP re-reads --auth-keys; a file with a mistake keeps the keys in use (and says which line).\n"
        text += "\nWithout --auth-keys sheetd answers loopback clients only (protected mode); others get 403\n"
        text += "auth_required until keys are configured or --allow-unauthenticated is given. With keys, each\n"
        text += "request sends Authorization: Bearer <key>; roles: app (its tenant's sessions), observer (reads\n"
        text += "them), operator (/metrics). /healthz and /openapi.yaml need no key.\n"
        text += "Sessions are durable by default: an answer is sent only once its change is committed to\n"
        text += "--data-dir/sheetd.sqlite3, and a restart carries on where sheetd stopped. Back it up while\n"
        text += "it runs with: sqlite3 sheetd-data/sheetd.sqlite3 \".backup backup.sqlite3\"\n"
        text += "With --database, any number of sheetd processes serve the same sessions from one PostgreSQL;\n"
        text += "each migrates the schema at start, and answers 503 store_unavailable while it is unreachable.\n"
        return text
    }

    private static func pad(_ text: String) -> String {
        text + String(repeating: " ", count: max(2, 40 - text.count))
    }

    private static func integer(_ text: String, _ name: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw UsageError(message: "--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"")
        }
        return value
    }

    private static func choice(_ text: String, _ name: String, _ options: [String]) throws(UsageError) -> String {
        guard options.contains(text) else {
            throw UsageError(message: "--\(name) must be one of \(options.joined(separator: ", ")), not \"\(text)\"")
        }
        return text
    }

    /// A duration flag's value. Capped at a hundred years: a larger one would overflow the clocks'
    /// arithmetic (and trap on the conversion below) instead of meaning anything.
    static func duration(_ text: String, _ name: String) throws(UsageError) -> Duration {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        var number = Substring(text)
        var scale = 1.0
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number), value.isFinite, value >= 0 else {
            throw UsageError(message: "--\(name) must be a duration such as 500ms, 30s, 10m or 24h, not \"\(text)\"")
        }
        guard value * scale <= 36500 * 86400 else {
            throw UsageError(message: "--\(name) must be at most 36500d, not \"\(text)\"")
        }
        return .milliseconds(Int64((value * scale * 1000).rounded()))
    }
}

extension String {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }

    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
