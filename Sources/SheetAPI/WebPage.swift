import HTTPServer

/// The pages sheetd serves to a browser: the index at `/` and the playground, a page that draws
/// a session's sheet, lets a person drag it and shows sheetd's answers and event stream.
/// Hand-written HTML, CSS and JavaScript in Resources/, embedded at build time as openapi.yaml
/// is, so the binary serves them from any working directory and nothing is fetched elsewhere.
///
/// Script and style are files of their own rather than inline: the Content-Security-Policy can
/// then allow only this origin's files (`'self'`) and no inline code at all, without a hash to
/// recompute by hand at every edit of the page.
enum WebPage: CaseIterable {
    case index
    case playground
    case playgroundScript
    case playgroundStyle

    var contentType: String {
        switch self {
        case .index, .playground: "text/html; charset=utf-8"
        case .playgroundScript: "text/javascript; charset=utf-8"
        case .playgroundStyle: "text/css; charset=utf-8"
        }
    }

    var bytes: [UInt8] {
        switch self {
        case .index: PackageResources.index_html
        case .playground: PackageResources.playground_html
        case .playgroundScript: PackageResources.playground_js
        case .playgroundStyle: PackageResources.playground_css
        }
    }

    /// Only this origin's script, style and API (fetch, EventSource); no inline script or style,
    /// no plugins, frames, forms to elsewhere or framing by other sites. `data:` images are the
    /// page's empty favicon, which keeps the browser from asking for /favicon.ico.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; "
        + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    /// Its GET in `RouteTable`, which holds the path it is served at. Open to anyone, as
    /// /openapi.yaml is: a browser loads the page before it can ask its user for an API key, and
    /// the page holds nothing but code; every call it makes to the API needs the key.
    var handler: MethodHandler {
        .get(.open) { _ in { request in self.response(requestID: request.requestID) } }
    }

    /// The answer to a GET. The page talks to the API on its own origin, so it works behind a
    /// proxy or load balancer that forwards all of sheetd's paths.
    func response(requestID: String) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.reserveCapacity(7)
        headers.add("Content-Type", contentType)
        headers.add("Content-Security-Policy", Self.contentSecurityPolicy)
        headers.add("X-Content-Type-Options", "nosniff")
        headers.add("Referrer-Policy", "no-referrer")
        // The files change only with the binary; revalidating each time keeps a browser from
        // running an old script against a newer server after an upgrade.
        headers.add("Cache-Control", "no-cache")
        headers.add("X-Request-Id", requestID)
        return HTTPResponse(status: 200, headers: headers, body: .bytes(bytes))
    }
}
