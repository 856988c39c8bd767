// swift-tools-version:6.2
import PackageDescription

/// Layers point one way: SheetCore ← SessionStore ← SheetAPI → HTTPServer ← sheetd.
/// SessionStore ← SheetJSON ← SheetObservability ← SheetAPI: JSON in and out, then what the service
/// says about itself, under the routes and handlers.
/// SessionStore, SheetJSON ← SQLiteArchive ← sheetd: the durable backend plugs in beside the API, not
/// under it, and stores events and configurations as the API writes them (SheetJSON's `Rendering`).
/// Only HTTPServer imports CMicroHTTPD (and CEpollInterposer, for it); only SheetJSON imports CJansson; only SQLiteArchive imports CSQLite;
/// only sheetd (its `--check` of an https:// URL) and AccessControl (SHA-256 of keys) import CGnuTLS.
/// Only PostgresStore imports CLibPQ.
/// SessionStore ← PostgresStore ← sheetd: the store of `--database`, beside the in-memory one.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "sheetd",
    // Linux (glibc) is where sheetd is built, tested and run. On Apple platforms the code needs
    // the Swift 6.2 concurrency runtime (`Task.immediate`, `SerialExecutor.isIsolatingCurrentContext`),
    // which is macOS 26; the libmicrohttpd, jansson and SQLite system libraries come from pkg-config.
    platforms: [.macOS(.v26)],
    products: [
        .executable(name: "sheetd", targets: ["sheetd"]),
        .library(name: "SheetCore", targets: ["SheetCore"]),
    ],
    targets: [
        .systemLibrary(
            name: "CMicroHTTPD",
            path: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CJansson",
            path: "CJansson",
            pkgConfig: "jansson",
            providers: [.apt(["libjansson-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            path: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CGnuTLS",
            path: "CGnuTLS",
            pkgConfig: "gnutls",
            providers: [.apt(["libgnutls28-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            path: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(name: "SheetCore", swiftSettings: strict),
        // The one lock type: a pthread-mutex-guarded value (ThreadSanitizer sees it).
        .target(name: "Locking", swiftSettings: strict),
        // Running an actor's work on the thread that asks for it (the drag answered without a task).
        .target(name: "InlineExecution", dependencies: ["Locking"], swiftSettings: strict),
        .target(name: "SessionStore", dependencies: ["SheetCore", "Locking", "InlineExecution", "Timekeeping"], swiftSettings: strict),
        .target(name: "SQLiteArchive", dependencies: ["SessionStore", "SheetCore", "SheetJSON", "CSQLite", "Locking"], swiftSettings: strict),
        // Sessions kept in PostgreSQL, shared by every sheetd pointed at the same database.
        .target(name: "PostgresStore", dependencies: ["SessionStore", "SheetCore", "SheetJSON", "CLibPQ", "Locking", "Timekeeping"], swiftSettings: strict),
        // The clock the timing rules read: the real one in service, a manual one in tests.
        .target(name: "Timekeeping", dependencies: ["Locking"], swiftSettings: strict),
        // epoll_wait as libmicrohttpd needs it: a call after a full batch of events does not block
        // (epoll_interposer.c says why).
        // DWARF 4: Debian's valgrind (3.19, which `make bench` runs callgrind with) cannot read the
        // DWARF 5 clang writes by default, and gives up on the whole binary.
        .target(name: "CEpollInterposer", cSettings: [.unsafeFlags(["-gdwarf-4"])]),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "CEpollInterposer", "Locking", "InlineExecution", "Timekeeping"], swiftSettings: strict),
        // Keys, roles and rate limits: who may make a request (no HTTP, no sessions in here).
        .target(name: "AccessControl", dependencies: ["Locking", "CGnuTLS"], swiftSettings: strict),
        // JSON in and out: request bodies read into actions, answers (sessions, events, errors)
        // written, and the error codes those answers carry.
        .target(name: "SheetJSON", dependencies: ["SheetCore", "SessionStore", "CJansson", "Locking"], swiftSettings: strict),
        // What the service says about itself: the metrics and their exposition, the request log,
        // the process figures from /proc.
        .target(
            name: "SheetObservability",
            dependencies: ["SheetCore", "SessionStore", "SheetJSON", "HTTPServer", "Locking"],
            swiftSettings: strict
        ),
        // The routes and their handlers.
        .target(
            name: "SheetAPI",
            dependencies: ["SheetCore", "SessionStore", "HTTPServer", "Locking", "AccessControl", "SheetJSON", "SheetObservability", "Timekeeping"],
            resources: [
                .embedInCode("Resources/openapi.yaml"),
                // The browser pages (WebPage.swift): the index at / and the playground.
                .embedInCode("Resources/index.html"),
                .embedInCode("Resources/playground.html"),
                .embedInCode("Resources/playground.js"),
                .embedInCode("Resources/playground.css"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "sheetcore-bench", dependencies: ["SheetCore"], path: "Sources/sheetcore-bench", swiftSettings: strict),
        .executableTarget(name: "sheetd", dependencies: ["SheetAPI", "SheetObservability", "HTTPServer", "SessionStore", "SQLiteArchive", "PostgresStore", "AccessControl", "CGnuTLS", "Locking"], swiftSettings: strict),
        // Fuzzing: the in-process request harness, and its libFuzzer / replay executable (.ci/fuzz).
        .target(name: "SheetFuzzing", dependencies: ["SheetAPI", "SheetJSON", "SheetObservability", "HTTPServer", "SessionStore"], swiftSettings: strict),
        .systemLibrary(name: "CLibFuzzer", path: "CLibFuzzer"),
        .executableTarget(name: "sheetd-fuzz", dependencies: ["SheetFuzzing", "CLibFuzzer"], path: "Sources/sheetd-fuzz", swiftSettings: strict),
        // `eventually`, for the test targets that wait for another thread (not a test target itself).
        .target(name: "Polling", path: "Tests/Polling", swiftSettings: strict),
        .testTarget(name: "SheetCoreTests", dependencies: ["SheetCore"], swiftSettings: strict),
        .testTarget(name: "LockingTests", dependencies: ["Locking"], swiftSettings: strict),
        .testTarget(name: "InlineExecutionTests", dependencies: ["InlineExecution"], swiftSettings: strict),
        .testTarget(name: "AccessControlTests", dependencies: ["AccessControl"], swiftSettings: strict),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "CEpollInterposer", "Locking", "Polling"], swiftSettings: strict),
        .testTarget(name: "SessionStoreTests", dependencies: ["SessionStore", "SheetCore", "Locking", "Timekeeping", "InlineExecution", "Polling"], swiftSettings: strict),
        .testTarget(name: "SQLiteArchiveTests", dependencies: ["SQLiteArchive", "SessionStore", "SheetCore", "SheetJSON", "CSQLite", "Locking", "Timekeeping", "Polling"], swiftSettings: strict),
        .testTarget(name: "SheetAPITests", dependencies: ["SheetAPI", "SheetJSON", "SheetObservability", "SheetCore", "SheetFuzzing", "SessionStore", "SQLiteArchive", "HTTPServer", "Timekeeping", "Locking", "Polling"], swiftSettings: strict),
        // Tests that start `sheetd` processes or serve real sockets in-process under load: they
        // run after every other target, on their own (`make test`), so no other test shares the
        // cores with them. Tests/README.md says which tests go where.
        .testTarget(
            name: "SheetdIntegrationTests",
            dependencies: ["HTTPServer", "Locking", "SheetCore", "CSQLite", "SheetFuzzing", "AccessControl", "Timekeeping",
                           "SessionStore", "PostgresStore", "SheetJSON", "Polling"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
