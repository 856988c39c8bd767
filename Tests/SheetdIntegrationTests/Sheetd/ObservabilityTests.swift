import Foundation
import Polling
import Testing

/// `/metrics`, the request log and request ids, against the real binary.
@Suite("Observability")
struct ObservabilityTests {
    /// Samples of the exposition as `name{labels}` → value.
    static func samples(_ text: String) -> [String: Double] {
        var result: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            result[String(line[..<space])] = value
        }
        return result
    }

    @Test func seedScenarioMovesEachCounterByWhatItDid() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            let before = Self.samples(try client.request("GET", "/metrics").text)

            let id = try #require(try client.request("POST", "/sessions", body: SeedScenarioTests.seedConfiguration).json["id"] as? String)
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#)             // detentChanged
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"height:300"}"#)         // intercepted (threshold)
            _ = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"cancel"}"#)      // confirmationCancelled
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"translation":300,"velocity":3000}"#) // gesture → closed, intercepted
            _ = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"discard"}"#)     // dismissed (discarded)
            _ = try client.request("POST", "/sessions/\(id)/present")                                     // presented
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"translation":-50,"velocity":-2000}"#) // gesture → large, no event
            _ = try client.request("POST", "/sessions/\(id)/confirm", body: #"{"action":"save"}"#)        // 409, counts nothing
            _ = try client.request("POST", "/sessions/\(id)/dismiss", body: #"{"reason":"done"}"#)        // dismissed (done)
            let version = try #require(try client.request("GET", "/sessions/\(id)").json["version"] as? Int)
            let poll = try client.request("GET", "/sessions/\(id)/events?after=\(version)&wait=0.1") // waits: a suspension
            #expect(poll.status == 200)

            let text = try client.request("GET", "/metrics")
            #expect(text.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
            let after = Self.samples(text.text)
            func delta(_ key: String) -> Double { (after[key] ?? 0) - (before[key] ?? 0) }

            #expect(delta(#"sheetd_events_total{type="presented"}"#) == 2)
            #expect(delta(#"sheetd_events_total{type="detentChanged"}"#) == 1)
            #expect(delta(#"sheetd_events_total{type="intercepted"}"#) == 2)
            #expect(delta(#"sheetd_events_total{type="confirmationCancelled"}"#) == 1)
            #expect(delta(#"sheetd_events_total{type="dismissBlocked"}"#) == 0)
            #expect(delta(#"sheetd_events_total{type="dismissed"}"#) == 2)
            #expect(delta(#"sheetd_dismissals_total{reason="discarded"}"#) == 1)
            #expect(delta(#"sheetd_dismissals_total{reason="done"}"#) == 1)
            #expect(delta(#"sheetd_dismissals_total{reason="swipe"}"#) == 0)
            #expect(delta(#"sheetd_interceptions_total{attempted="threshold"}"#) == 1)
            #expect(delta(#"sheetd_interceptions_total{attempted="closed"}"#) == 1)
            #expect(delta(#"sheetd_confirmations_total{action="cancel"}"#) == 1)
            #expect(delta(#"sheetd_confirmations_total{action="discard"}"#) == 1)
            #expect(delta(#"sheetd_confirmations_total{action="save"}"#) == 0)
            #expect(delta(#"sheetd_gesture_targets_total{target="closed"}"#) == 1)
            #expect(delta(#"sheetd_gesture_targets_total{target="detent"}"#) == 1)
            #expect(after[#"sheetd_sessions{phase="dismissed"}"#] == 1)
            #expect(after[#"sheetd_sessions{phase="presented"}"#] == 0)
            #expect(delta(#"http_requests_total{method="POST",route="/sessions",status="201"}"#) == 1)
            #expect(delta(#"http_requests_total{method="POST",route="/sessions/{id}/drag",status="200"}"#) == 4)
            #expect(delta(#"http_requests_total{method="POST",route="/sessions/{id}/confirm",status="200"}"#) == 2)
            #expect(delta(#"http_requests_total{method="POST",route="/sessions/{id}/confirm",status="409"}"#) == 1)
            #expect(delta(#"http_request_duration_seconds_count{route="/sessions/{id}/drag"}"#) == 4)
            #expect(after[#"http_request_duration_seconds_bucket{route="/sessions/{id}/drag",le="+Inf"}"#] == 4)
            #expect((after["sheetd_open_connections"] ?? 0) >= 1)
            #expect(delta("sheetd_request_suspensions_total") >= 1)
            #expect((after["process_resident_memory_bytes"] ?? 0) > 1_000_000)
            #expect((after["process_open_fds"] ?? 0) > 3)
            // The soft open-file limit, as /proc says it for the process.
            let soft = try server.softOpenFileLimit().flatMap { Double($0) }
            #expect(soft != nil && after["process_max_fds"] == soft, "\(String(describing: soft))")
            #expect((after["process_start_time_seconds"] ?? 0) > 1_700_000_000)
            #expect(after["process_cpu_seconds_total"] != nil)
            // Never a raw id in a label.
            #expect(!text.text.contains(id))
            #expect(server.stop() == 0)
        }
    }

    @Test func textLogHasOneLinePerRequest() async throws {
        try await offPool {
            let server = try SheetdProcess()
            let client = try server.client()
            _ = try client.request("GET", "/healthz", headers: [("X-Request-Id", "probe-1")])
            _ = try client.request("GET", "/nowhere", headers: [("X-Request-Id", "probe-2")])
            #expect(server.stop() == 0)
            let lines = server.stderr.split(separator: "\n")
            let health = try #require(lines.first { $0.contains("probe-1") })
            #expect(health.contains("GET /healthz 200"))
            #expect(health.hasSuffix("ms"))
            #expect(lines.contains { $0.contains("probe-2") && $0.contains("GET /nowhere 404") })
        }
    }

    @Test func jsonLogLinesAreObjects() async throws {
        try await offPool {
            let server = try SheetdProcess(["--log-format", "json"])
            let client = try server.client()
            let created = try client.request("POST", "/sessions", body: "{}", headers: [("X-Request-Id", "json-1")])
            let id = try #require(created.json["id"] as? String)
            _ = try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"large"}"#, headers: [("X-Request-Id", "json-2")])
            #expect(server.stop() == 0)
            let objects = server.stderr.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }
            let drag = try #require(objects.first { $0["requestId"] as? String == "json-2" })
            #expect(drag["method"] as? String == "POST")
            #expect(drag["route"] as? String == "/sessions/{id}/drag")
            #expect(drag["path"] as? String == "/sessions/\(id)/drag")
            #expect(drag["status"] as? Int == 200)
            #expect(drag["durationMicros"] is Int)
            #expect(drag["bytesIn"] as? Int == 14)
            #expect((drag["bytesOut"] as? Int ?? 0) > 100)
            #expect(drag["client"] as? String == "127.0.0.1")
            #expect(objects.first { $0["requestId"] as? String == "json-1" }?["status"] as? Int == 201)
        }
    }

    /// Clients that leave in the middle of an exchange (a presenter closing its stream, a client
    /// resetting a long-poll, a head or a body cut short) are logged at debug, never as errors:
    /// they are not faults of the server. The waits only end a failure.
    @Test func clientsThatLeaveAreNotErrors() async throws {
        try await offPool {
            let server = try SheetdProcess(["--log-level", "debug"])
            let client = try server.client()
            let id = try EventsTests.create(client)
            /// Whether the log comes to satisfy `done` (waiting for it; the bound only ends a failure).
            func logged(_ done: @escaping (String) -> Bool) -> Bool { done(server.process.waitForStandardError(within: 60, until: done)) }
            func suspensions() throws -> Double { try SheetStoriesTests.metrics(client)["sheetd_request_suspensions_total"] ?? -1 }

            _ = try EventsTests.openStream(server, id)   // closed (FIN) as it goes out of scope
            let streamLine = "GET /sessions/\(id)/events 200 "
            #expect(logged { $0.split(separator: "\n").contains { $0.contains(streamLine) && $0.hasSuffix("(client gone)") } })

            let held = try suspensions()
            let longPoll = try RawHTTPClient(port: server.port)
            try longPoll.send("GET /sessions/\(id)/events?after=1&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try eventuallyBlocking(within: .seconds(60), every: .milliseconds(20)) { try suspensions() > held },
                    "the long-poll is held")
            longPoll.abort()
            // The long-poll ends as the client gone, or its answer goes to a reset socket: which,
            // depends on when sheetd sees the reset. Either way its request is logged, after the stream's.
            #expect(try client.request("POST", "/sessions/\(id)/drag", body: #"{"to":"medium"}"#).status == 200)
            let eventsLine = "GET /sessions/\(id)/events "
            #expect(logged { $0.components(separatedBy: eventsLine).count > 2 })

            // Which line libmicrohttpd writes for these, if any, depends on what it read before the reset.
            for cutShort in ["GET /healthz HTTP/1.1\r\nHo", "POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"] {
                let raw = try RawHTTPClient(port: server.port)
                try raw.send(cutShort)
                usleep(100_000)
                raw.abort()
            }
            #expect(try client.request("GET", "/healthz").status == 200)
            #expect(server.stop() == 0)
            #expect(!server.stderr.contains("ERROR"), "\(server.stderr.suffix(3000))")
        }
    }

    @Test func quietLogLevels() async throws {
        try await offPool {
            let server = try SheetdProcess(["--log-level", "warn"])
            let client = try server.client()
            _ = try client.request("GET", "/healthz", headers: [("X-Request-Id", "quiet-ok")])
            _ = try client.request("GET", "/nowhere", headers: [("X-Request-Id", "quiet-404")])
            #expect(server.stop() == 0)
            #expect(!server.stderr.contains("quiet-ok"))
            #expect(server.stderr.contains("quiet-404"))
        }
    }
}
