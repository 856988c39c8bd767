import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Polling

/// Several real sheetd processes on one private PostgreSQL (`--database`): what a scaled-out
/// deployment is, without the load balancer (tests pick the instance of each request).
final class SheetdCluster: @unchecked Sendable {
    // @unchecked Sendable: `instances` is only replaced by the test that owns the cluster; the
    // processes and the server are themselves safe to share.
    let postgres: PostgresServer
    let instances: [SheetdProcess]

    init(instances count: Int = 3, arguments: [String] = []) throws {
        postgres = try PostgresServer()
        var instances: [SheetdProcess] = []
        for _ in 0..<count {
            instances.append(try SheetdProcess(["--database", postgres.url, "--log-level", "warn"] + arguments))
        }
        self.instances = instances
    }

    /// A client of instance `index`.
    func client(_ index: Int, receiveTimeout: Double = 30) throws -> TestHTTPClient {
        try instances[index].client(receiveTimeout: receiveTimeout)
    }

    /// Creates a session that blocks dismissal: each `drag {"to":"closed"}` then records one
    /// `dismissBlocked` event and adds exactly one to the version, so versions count drags.
    func createCountingSession(through index: Int = 0) throws -> String {
        let created = try client(index).request("POST", "/sessions", body: #"{"dismissPolicy":"block"}"#)
        guard created.status == 201, let id = created.json["id"] as? String else {
            throw TestClientError(description: "create answered \(created.status): \(created.text)")
        }
        return id
    }

    /// Waits until every instance's /healthz answers `status`, each within `timeout` seconds (which
    /// only end a failing test).
    func awaitHealth(_ status: Int, of indices: [Int]? = nil, timeout: Double = 60) throws {
        for index in indices ?? Array(instances.indices) {
            var answer: TestResponse?
            guard eventuallyBlocking(within: .seconds(timeout), every: .milliseconds(20), {
                answer = try? client(index, receiveTimeout: 10).request("GET", "/healthz")
                return answer?.status == status
            }) else {
                throw TestClientError(description: "instance \(index) /healthz is not \(status): \(answer.map { "\($0.status) \($0.text)" } ?? "no answer")")
            }
        }
    }
}

/// Clients dragging counting sessions over the instances of a cluster, each on its own thread,
/// recording what every request got. Only the test's thread asserts, on `results()`, after `wait()`.
final class DragLoad: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is only touched with `lock` held.
    struct Results {
        /// Versions acknowledged (a 200 carrying them), per session id.
        var acknowledged: [String: [Int]] = [:]
        /// Answers by status.
        var statuses: [Int: Int] = [:]
        /// 503 answers: their error code and Retry-After.
        var unavailable: [(code: String?, retryAfter: String?)] = []
        /// Anything else: unexpected statuses, answers that do not count one drag, transport errors.
        var anomalies: [String] = []
        /// Transport errors (no answer at all), by port.
        var transportErrors: [Int: Int] = [:]
        var total: Int { acknowledged.values.reduce(0) { $0 + $1.count } }
    }

    private let sessions: [String]
    private let lock = NSLock()
    private var ports: [Int]
    private var collected = Results()
    private var stopRequested = false
    private let finished = DispatchGroup()

    /// Starts `clients` clients of `drags` drags each (or until `stop()`), spread over `sessions`
    /// and over the instances listening on `ports`, a different instance for each request.
    init(sessions: [String], ports: [Int], clients: Int, drags: Int) {
        self.sessions = sessions
        self.ports = ports
        for client in 0..<clients {
            finished.enter()
            let thread = Thread { [self] in
                drive(client: client, drags: drags)
                finished.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Takes `port` out of the rotation (before its instance is killed).
    func remove(port: Int) {
        lock.lock()
        ports.removeAll { $0 == port }
        lock.unlock()
    }

    /// Asks every client to end after its current request.
    func stop() {
        lock.lock()
        stopRequested = true
        lock.unlock()
    }

    /// Waits for every client to end; false when one is still running after `timeout`.
    @discardableResult
    func wait(timeout: Double = 300) -> Bool {
        finished.wait(timeout: .now() + timeout) == .success
    }

    func results() -> Results {
        lock.lock()
        defer { lock.unlock() }
        return collected
    }

    private func record(_ change: (inout Results) -> Void) {
        lock.lock()
        change(&collected)
        lock.unlock()
    }

    private func next(_ client: Int, _ step: Int) -> (port: Int, stopping: Bool) {
        lock.lock()
        defer { lock.unlock() }
        return (ports[(client + step) % ports.count], stopRequested)
    }

    private func drive(client: Int, drags: Int) {
        var connections: [Int: TestHTTPClient] = [:]
        for step in 0..<drags {
            let (port, stopping) = next(client, step)
            if stopping { break }
            let session = sessions[(client * 7 + step) % sessions.count]
            do {
                let connection = try connections[port] ?? TestHTTPClient(port: port, receiveTimeout: 30)
                connections[port] = connection
                let answer = try connection.request("POST", "/sessions/\(session)/drag", body: #"{"to":"closed"}"#)
                count(answer, session: session)
                if answer.status == 503 { usleep(20_000) }  // pacing while the store is away
            } catch {
                connections[port] = nil
                record {
                    $0.transportErrors[port, default: 0] += 1
                    $0.anomalies.append("port \(port): \(error)")
                }
            }
        }
    }

    private func count(_ answer: TestResponse, session: String) {
        let version = (answer.json["session"] as? [String: Any])?["version"] as? Int
        let events = (answer.json["events"] as? [[String: Any]]) ?? []
        record { results in
            results.statuses[answer.status, default: 0] += 1
            switch answer.status {
            case 200:
                if let version, events.count == 1, events[0]["seq"] as? Int == version,
                   events[0]["type"] as? String == "dismissBlocked", answer.header("ETag") == "\"\(version)\"" {
                    results.acknowledged[session, default: []].append(version)
                } else {
                    results.anomalies.append("a 200 that is not one drag: \(answer.text)")
                }
            case 503:
                results.unavailable.append((answer.errorCode, answer.header("Retry-After")))
            default:
                results.anomalies.append("\(answer.status): \(answer.text)")
            }
        }
    }
}
