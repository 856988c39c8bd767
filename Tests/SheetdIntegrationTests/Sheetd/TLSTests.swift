import Foundation
import Testing

/// HTTPS through libmicrohttpd's own TLS, with a certificate this test makes with openssl.
@Suite("TLS")
struct TLSTests {
    final class Certificate: @unchecked Sendable {
        // @unchecked Sendable: written once in init, then only read.
        let directory: URL
        var certificate: String { directory.appendingPathComponent("crt.pem").path }
        var key: String { directory.appendingPathComponent("key.pem").path }

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("sheetd-tls-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let made = try runToEnd(URL(fileURLWithPath: "/usr/bin/openssl"), [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", directory.appendingPathComponent("key.pem").path,
                "-out", directory.appendingPathComponent("crt.pem").path, "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
            guard made.status == 0 else { throw TestClientError(description: "openssl: \(made.stderr)") }
        }

        deinit { try? FileManager.default.removeItem(at: directory) }
    }

    static let curl = URL(fileURLWithPath: "/usr/bin/curl")

    @Test func httpsWithTheCASucceedsPlainHTTPAndUntrustingClientsFailCleanly() async throws {
        try await offPool {
            let tls = try Certificate()
            let server = try SheetdProcess(["--tls-cert", tls.certificate, "--tls-key", tls.key])
            #expect(server.stderr.contains("listening on https://"))
            let url = "https://127.0.0.1:\(server.port)"

            let trusted = try runToEnd(Self.curl, ["-sS", "--max-time", "10", "--cacert", tls.certificate, "\(url)/healthz"])
            #expect(trusted.status == 0, "\(trusted.stderr)")
            #expect(trusted.stdout == #"{"status":"ok"}"#)
            let created = try runToEnd(Self.curl, ["-sS", "--max-time", "10", "--cacert", tls.certificate, "-d", "{}", "\(url)/sessions"])
            #expect(created.status == 0 && created.stdout.contains("\"version\":1"), "\(created.stdout) \(created.stderr)")

            // A client that does not trust the certificate refuses it (curl: 60, peer certificate).
            let untrusting = try runToEnd(Self.curl, ["-sS", "--max-time", "10", "\(url)/healthz"])
            #expect(untrusting.status == 60, "\(untrusting.status) \(untrusting.stderr)")

            // Plain HTTP to the TLS port gets no HTTP answer: the connection just ends.
            let plain = try server.client()
            #expect(throws: TestClientError.self) { try plain.request("GET", "/healthz") }

            // ... and the server serves on as before.
            let again = try runToEnd(Self.curl, ["-sS", "--max-time", "10", "--cacert", tls.certificate, "\(url)/healthz"])
            #expect(again.status == 0)

            // The container's health check: an https:// URL, or an http:// one while the
            // environment configures TLS, as the image's HEALTHCHECK runs it.
            #expect(try runSheetd(["--check", "\(url)/healthz"]).status == 0)
            let environment = ["SHEETD_TLS_CERT": tls.certificate, "SHEETD_TLS_KEY": tls.key]
            #expect(try runSheetd(["--check", "http://127.0.0.1:\(server.port)/healthz"], environment: environment).status == 0)
            #expect(try runSheetd(["--check", "http://127.0.0.1:\(server.port)/healthz"]).status == 1)
            #expect(server.stop() == 0)
        }
    }

    @Test func aKeyThatIsNotPEMStopsStartUp() async throws {
        try await offPool {
            let tls = try Certificate()
            let run = try runSheetd(["--tls-cert", tls.certificate, "--tls-key", tls.certificate, "--port", "0", "--memory"])
            #expect(run.status != 0)
            #expect(!run.stderr.contains("listening on"))
        }
    }
}
