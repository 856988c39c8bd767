import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One child to start with `posix_spawn`: the whole argv (`setpriv …` first when the child is to
/// be tied to this process), its environment, its directory, where its output goes. Used by
/// `ChildProcess` and `ReapedChild`; run on `ChildSpawner`'s thread.
struct SpawnRequest: Sendable {
    /// Where a child's standard output or error goes.
    enum Destination: Sendable, Equatable {
        case null
        /// A pipe whose read end `run` returns.
        case pipe
        /// Appended to this file (created if missing).
        case file(String)
        /// Standard error only: wherever standard output goes.
        case standardOutput
    }

    let program: [String]
    let environment: [String]
    var directory: String?
    var standardOutput: Destination = .null
    var standardError: Destination = .null

    /// Starts the child: its pid, and the read end of the pipe of each `.pipe` descriptor (1, 2).
    /// The pipes are made here, on the spawner thread, close-on-exec, and the child closes every
    /// descriptor above 2 of this process anyway: nothing of the test process (sockets, other
    /// children's pipes) leaks into it, so no end of file is held back by a stray copy.
    func run() throws -> (pid_t, [Int32: Int32]) {
        var readEnds: [Int32: Int32] = [:]
        var writeEnds: [Int32: Int32] = [:]
        defer { for fd in writeEnds.values { close(fd) } }
        for (target, destination) in [(Int32(1), standardOutput), (Int32(2), standardError)] where destination == .pipe {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else {
                for fd in readEnds.values { close(fd) }
                throw TestClientError(description: "pipe: errno \(errno)")
            }
            for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            readEnds[target] = ends[0]
            writeEnds[target] = ends[1]
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        for (target, destination) in [(Int32(1), standardOutput), (Int32(2), standardError)] {
            switch destination {
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            case .pipe: posix_spawn_file_actions_adddup2(&actions, writeEnds[target]!, target)
            case .file(let path): posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            case .standardOutput: posix_spawn_file_actions_adddup2(&actions, 1, target)
            }
        }
        if let closeFrom = GlibcSpawnExtensions.closeFrom { _ = closeFrom(&actions, 3) }
        if let directory {
            guard let changeDirectory = GlibcSpawnExtensions.changeDirectory else {
                for fd in readEnds.values { close(fd) }
                throw TestClientError(description: "glibc has no posix_spawn_file_actions_addchdir_np (2.29+)")
            }
            _ = changeDirectory(&actions, directory)
        }
        // The child starts with no signal blocked or ignored, whatever this process does
        // (sheetd waits for its signals with sigwait; an inherited SIG_IGN would hide them).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = program.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program[0], &actions, &attributes, argv, envp)
        guard result == 0 else {
            for fd in readEnds.values { close(fd) }
            throw TestClientError(description: "posix_spawn \(program[0]): \(String(cString: strerror(result)))")
        }
        return (pid, readEnds)
    }
}

/// glibc's GNU extensions to posix_spawn (2.29 and 2.34), which the Glibc module does not
/// import (they are declared only under _GNU_SOURCE): looked up by name.
private enum GlibcSpawnExtensions {
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    static let closeFrom: CloseFrom? = symbol("posix_spawn_file_actions_addclosefrom_np")
    static let changeDirectory: ChangeDirectory? = symbol("posix_spawn_file_actions_addchdir_np")

    private static func symbol<T>(_ name: String) -> T? {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(address, to: T.self)
    }
}

/// The one thread that spawns this test process's children. PR_SET_PDEATHSIG (set by setpriv)
/// fires when the *thread* that spawned the child ends, not the process, and test code runs on
/// threads that come and go (`offPool` makes one per job): this thread lives as long as the
/// test process.
final class ChildSpawner: @unchecked Sendable {
    // @unchecked Sendable: `jobs` is only touched with `condition` locked.
    static let shared = ChildSpawner()
    /// util-linux's setpriv, which ties a child to this process (`--pdeathsig KILL`) and execs it.
    static let setpriv = "/usr/bin/setpriv"

    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []

    private init() {
        let thread = Thread { [unowned self] in
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job()
            }
        }
        thread.name = "child-spawner"
        thread.start()
    }

    /// Runs `body` on the spawner thread and waits for it (a spawn is quick).
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let outcome = SpawnOutcome<T>()
        condition.lock()
        jobs.append {
            outcome.set(Result { try body() })
            done.signal()
        }
        condition.signal()
        condition.unlock()
        done.wait()
        return try outcome.get()
    }
}

/// The spawner's result, handed back to the waiting thread.
private final class SpawnOutcome<T: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `result` is written before `done.signal()` and read after
    // `done.wait()`, both under `lock`.
    private let lock = NSLock()
    private var result: Result<T, any Error>?
    func set(_ value: Result<T, any Error>) { lock.lock(); result = value; lock.unlock() }
    func get() throws -> T { lock.lock(); defer { lock.unlock() }; return try result!.get() }
}
