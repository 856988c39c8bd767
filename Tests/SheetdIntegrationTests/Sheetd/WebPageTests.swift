import Foundation
import Testing

/// The browser pages (the index and the playground) over HTTP from the real binary. What the
/// page does in a browser is tested in Tests/Browser with Chromium; this checks what a browser
/// is handed: the files, their types, and the policy that keeps them to this origin.
@Suite("Web pages over HTTP")
struct WebPageTests {
    static let server = Result { try SheetdProcess() }

    static let resources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/SheetAPI/Resources")

    static let policy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; "
        + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    @Test(arguments: [
        ("/", "index.html", "text/html; charset=utf-8"),
        ("/playground", "playground.html", "text/html; charset=utf-8"),
        ("/playground.js", "playground.js", "text/javascript; charset=utf-8"),
        ("/playground.css", "playground.css", "text/css; charset=utf-8"),
    ])
    func servesTheEmbeddedFile(_ path: String, _ file: String, _ contentType: String) async throws {
        try await offPool {
            let client = try Self.server.get().client()
            let page = try client.request("GET", path)
            #expect(page.status == 200)
            #expect(page.header("Content-Type") == contentType)
            #expect(page.header("Content-Security-Policy") == Self.policy)
            #expect(page.header("X-Content-Type-Options") == "nosniff")
            #expect(page.header("Cache-Control") == "no-cache")
            #expect(page.header("X-Request-Id") != nil)
            let onDisk = try Data(contentsOf: Self.resources.appendingPathComponent(file))
            #expect(page.body == Array(onDisk), "\(path) is byte-for-byte Resources/\(file)")
            let head = try client.request("HEAD", path)
            #expect(head.status == 200 && head.body.isEmpty)
        }
    }

    @Test(arguments: ["/", "/playground", "/playground.js", "/playground.css"])
    func answersGetOnly(_ path: String) async throws {
        try await offPool {
            let client = try Self.server.get().client()
            let posted = try client.request("POST", path, body: "{}")
            #expect(posted.status == 405)
            #expect(posted.header("Allow") == "GET")
            #expect(posted.errorCode == "method_not_allowed")
        }
    }

    /// The policy allows no inline script or style: the pages must not need any, or the browser
    /// would silently refuse it.
    @Test(arguments: ["index.html", "playground.html"])
    func pagesNeedNoInlineCode(_ file: String) throws {
        let html = try String(contentsOf: Self.resources.appendingPathComponent(file), encoding: .utf8)
        let inlineScript = try Regex(#"<script(?![^>]*\bsrc=)[^>]*>"#)
        let handlerAttribute = try Regex(#"\son[a-z]+\s*="#)
        #expect(html.firstMatch(of: inlineScript) == nil, "an inline <script>")
        #expect(html.firstMatch(of: handlerAttribute) == nil, "an inline event handler")
        #expect(!html.contains("<style"), "an inline <style>")
        #expect(!html.contains(" style="), "a style attribute")
        #expect(!html.contains("javascript:"), "a javascript: URL")
        for reference in html.matches(of: try Regex(#"(?:src|href)="([^"]*)""#)) {
            let target = String(reference.output[1].substring ?? "")
            #expect(target.hasPrefix("/") || target.hasPrefix("data:"), "\(target) is fetched from elsewhere")
        }
    }

    @Test func theIndexLinksThePlayground() async throws {
        try await offPool {
            let index = try Self.server.get().client().request("GET", "/")
            #expect(index.text.contains(#"href="/playground""#))
        }
    }
}
