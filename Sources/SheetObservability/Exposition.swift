#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTPServer
import SessionStore
import SheetCore
import SheetJSON

extension ServiceObserver {
    /// The Prometheus text exposition (format 0.0.4) of every metric sheetd keeps.
    package func exposition(store: any SessionStoring) async -> [UInt8] {
        let phases = await store.phaseCounts()
        var out = PrometheusText()
        let m = metrics

        out.family("http_requests_total", "counter", "HTTP requests answered, by method, route template and status.")
        for (r, route) in m.routes.enumerated() {
            for (k, method) in m.methods.enumerated() {
                for (s, status) in Metrics.statuses.enumerated() {
                    let value = m.requests[(r * m.methods.count + k) * Metrics.statuses.count + s]
                    guard value > 0 else { continue }
                    let statusLabel = status == 0 ? "other" : String(status)
                    out.sample("http_requests_total", [("method", method), ("route", route), ("status", statusLabel)], Double(value))
                }
            }
        }

        out.family("http_request_duration_seconds", "histogram", "Time from the request's headers to its answer, by route template.")
        for (r, route) in m.routes.enumerated() {
            let count = m.durationCount[r]
            guard count > 0 else { continue }
            var cumulative: UInt64 = 0
            for (b, bound) in Metrics.buckets.enumerated() {
                cumulative += m.durationBuckets[r * (Metrics.buckets.count + 1) + b]
                out.sample("http_request_duration_seconds_bucket", [("route", route), ("le", JSONWriter.format(bound))], Double(cumulative))
            }
            out.sample("http_request_duration_seconds_bucket", [("route", route), ("le", "+Inf")], Double(count))
            out.sample("http_request_duration_seconds_sum", [("route", route)], Double(m.durationSumMicros[r]) / 1e6)
            out.sample("http_request_duration_seconds_count", [("route", route)], Double(count))
        }

        out.family("sheetd_sessions", "gauge", "Sessions held now, by phase.")
        for phase in Phase.allCases {
            out.sample("sheetd_sessions", [("phase", phase.rawValue)], Double(phases[phase] ?? 0))
        }
        out.family("sheetd_tenant_sessions", "gauge", "Sessions held now, by tenant (the tenants of the keys file, or default).")
        for (tenant, count) in store.sessionsPerTenant.sorted(by: { $0.key.name < $1.key.name }) {
            out.sample("sheetd_tenant_sessions", [("tenant", tenant.name)], Double(count))
        }
        out.counters("sheetd_events_total", "Events recorded, by type.",
                     label: "type", Metrics.eventTypes.map(\.rawValue), m.events)
        out.counters("sheetd_dismissals_total", "Sheets dismissed, by reason.",
                     label: "reason", Metrics.dismissReasons.map(\.rawValue), m.dismissals)
        out.counters("sheetd_navigations_total", "Navigation inside sheets, by kind; a pop is never a dismissal.",
                     label: "kind", Metrics.NavigationKind.allCases.map(\.rawValue), m.navigations)
        out.counters("sheetd_interceptions_total", "Dismissal attempts intercepted, by what the user dragged to.",
                     label: "attempted", Metrics.InterceptedAttempt.allCases.map(\.rawValue), m.interceptions)
        out.counters("sheetd_confirmations_total", "Answers to the Discard changes question, by action.",
                     label: "action", Metrics.confirmActions.map(\.rawValue), m.confirmations)
        out.counters("sheetd_gesture_targets_total", "Where released gestures settled: a detent, or closed.",
                     label: "target", Metrics.GestureSettling.allCases.map(\.rawValue), m.gestureTargets)
        out.counters("sheetd_auth_failures_total",
                     "Requests refused before their route: no or unknown key, a role that does not allow it, protected mode, rate limit.",
                     label: "reason", AccessRefusal.allCases.map(\.rawValue), m.refusals)
        let server = serverFigures
        out.family("sheetd_open_connections", "gauge", "HTTP connections open now.")
        out.sample("sheetd_open_connections", [], Double(server.openConnections))
        out.family("sheetd_request_suspensions_total", "counter",
                   "Requests that waited for the store (a busy shard, a long-poll, a commit) on a suspended connection; the others were answered on the connection's thread.")
        out.sample("sheetd_request_suspensions_total", [], Double(server.requestSuspensions))

        let process = ProcessFigures.read()
        out.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
        out.sample("process_cpu_seconds_total", [], process.cpuSeconds)
        out.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
        out.sample("process_resident_memory_bytes", [], process.residentBytes)
        out.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
        out.sample("process_virtual_memory_bytes", [], process.virtualBytes)
        out.family("process_open_fds", "gauge", "Number of open file descriptors.")
        out.sample("process_open_fds", [], process.openFileDescriptors)
        out.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
        out.sample("process_max_fds", [], process.maxFileDescriptors)
        out.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
        out.sample("process_start_time_seconds", [], startTime)
        return out.bytes
    }
}

/// Builds the text format: `# HELP`, `# TYPE`, then `name{label="value"} number` lines.
package struct PrometheusText {
    private(set) var bytes: [UInt8] = []

    package init() { bytes.reserveCapacity(16 * 1024) }

    package mutating func family(_ name: String, _ type: String, _ help: String) {
        append("# HELP \(name) \(help)\n# TYPE \(name) \(type)\n")
    }

    /// A counter family with one label: a sample per value, from the counter at the same index.
    package mutating func counters(_ name: String, _ help: String, label: String, _ values: [String], _ cells: CounterCells) {
        precondition(values.count == cells.count, "\(name): \(values.count) label values for \(cells.count) cells")
        family(name, "counter", help)
        for (index, value) in values.enumerated() { sample(name, [(label, value)], Double(cells[index])) }
    }

    package mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
        var line = name
        if !labels.isEmpty {
            line += "{" + labels.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        line += " " + JSONWriter.format(value) + "\n"
        append(line)
    }

    private func escape(_ value: String) -> String {
        var result = ""
        for character in value {
            switch character {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "\n": result += "\\n"
            default: result.append(character)
            }
        }
        return result
    }

    private mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
}

/// The process figures Prometheus clients conventionally export, read from /proc.
package struct ProcessFigures {
    package var cpuSeconds = 0.0
    package var residentBytes = 0.0
    package var virtualBytes = 0.0
    package var openFileDescriptors = 0.0
    package var maxFileDescriptors = 0.0

    package static func read() -> ProcessFigures {
        var figures = ProcessFigures()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        if let stat = readFile("/proc/self/stat"), let close = stat.lastIndex(of: ")") {
            // Fields after "(comm)": state is field 3; utime 14, stime 15, vsize 23, rss 24.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            func field(_ number: Int) -> Double { Double(fields[number - 3]) ?? 0 }
            if fields.count > 22 {
                figures.cpuSeconds = (field(14) + field(15)) / ticks
                figures.virtualBytes = field(23)
                figures.residentBytes = field(24) * page
            }
        }
        if let directory = opendir("/proc/self/fd") {
            var count = 0
            // Read d_name in place, up to its NUL: glibc sizes each entry to its name (d_reclen),
            // so copying the whole `dirent` (entry.pointee) reads past the last entry's end.
            let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19 // 19 on glibc
            while let entry = readdir(directory) {
                let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
                if name != "." && name != ".." { count += 1 }
            }
            closedir(directory)
            figures.openFileDescriptors = Double(max(0, count - 1))  // less the descriptor opendir used
        }
        figures.maxFileDescriptors = Double(OpenFileLimit.current)
        return figures
    }

    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}
