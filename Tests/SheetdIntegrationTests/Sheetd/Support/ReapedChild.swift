import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Polling

/// A child process spawned with `posix_spawn` and reaped with `waitpid` by the test code itself,
/// for tools whose end the test waits for (initdb, createdb, psql) and servers whose pid it must
/// signal and reap (the postmaster). Not Foundation's `Process`: its `waitUntilExit` has hung here
/// on a child that had already exited (a zombie nobody reaped), holding a whole test run.
///
/// Every child is tied to the test process (`setpriv --pdeathsig KILL`, spawned on
/// `ChildSpawner`'s long-lived thread, as `ChildProcess`'s are), so none outlives a test run
/// that is killed. `user` runs it as that account (when this process is root): setpriv changes
/// the credentials first and sets the death signal after, since a change of uid clears it.
struct ReapedChild: Sendable {
    let pid: pid_t

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts `program` with `arguments`, in `directory`, stdout and stderr appended to `output`.
    static func spawn(
        _ program: String, _ arguments: [String], user: String? = nil, directory: String, output: String,
        environment: [String: String] = ["PATH": "/usr/bin:/bin", "LC_ALL": "C"]
    ) throws -> ReapedChild {
        var argv = ["--pdeathsig", "KILL", "--", program] + arguments
        if let user { argv = ["--reuid=\(user)", "--regid=\(user)", "--clear-groups"] + argv }
        let env = environment.map { "\($0.key)=\($0.value)" }
        let launch = SpawnRequest(program: [ChildSpawner.setpriv] + argv, environment: env, directory: directory,
                                  standardOutput: .file(output), standardError: .standardOutput)
        let (pid, _) = try ChildSpawner.shared.perform { try launch.run() }
        return ReapedChild(pid: pid)
    }

    /// Runs to the end and returns what it wrote; throws with that text on a non-zero exit.
    @discardableResult
    static func run(
        _ program: String, _ arguments: [String], user: String? = nil, directory: String, timeout: Double = 120
    ) throws -> String {
        let output = directory + "/.output-\(UUID().uuidString)"
        defer { unlink(output) }
        let child = try spawn(program, arguments, user: user, directory: directory, output: output)
        let status = child.wait(timeout: timeout)
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw Failure(description: "\(program) \(arguments.joined(separator: " ")) ended with \(status.map(String.init) ?? "a timeout"): \(text)")
        }
        return text
    }

    /// Waits for the exit and reaps it; the exit status (128 + signal when killed), or nil when
    /// it was still running after `timeout` seconds (then it is killed and reaped).
    @discardableResult
    func wait(timeout: Double) -> Int32? {
        if let exit = retriedBlocking(within: .seconds(timeout), every: .milliseconds(5), poll) { return exit }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return nil
    }

    /// The exit status if it has ended (reaped now), nil while it runs.
    func poll() -> Int32? {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == 0 { return nil }
        if result < 0 { return errno == EINTR ? nil : -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
