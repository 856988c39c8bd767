import SessionStore

/// Every path sheetd serves. Parsing a path gives a route (with its id still as text: an id that
/// cannot exist is "session not found", not "route not found").
enum Route: Sendable, Equatable {
    enum Action: String, Sendable {
        case drag, confirm, dismiss, present
    }

    case sessions
    case session(Substring)
    case action(Substring, Action)
    case events(Substring)
    case health
    case metrics
    case openAPI

    init?(path: String) {
        switch path {
        case "/sessions": self = .sessions
        case "/healthz": self = .health
        case "/metrics": self = .metrics
        case "/openapi.yaml": self = .openAPI
        default:
            // Parsed three times per request (preflight, answer, log): scan, do not split.
            guard path.hasPrefix("/sessions/") else { return nil }
            let rest = path.utf8.dropFirst("/sessions/".utf8.count)
            guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else {
                guard !rest.isEmpty else { return nil }
                self = .session(Substring(rest))
                return
            }
            let id = Substring(rest[..<slash])
            let tail = rest[rest.index(after: slash)...]
            guard !id.isEmpty, !tail.contains(UInt8(ascii: "/")) else { return nil }
            if tail.elementsEqual("events".utf8) { self = .events(id); return }
            guard let action = Action(rawValue: String(Substring(tail))) else { return nil }
            self = .action(id, action)
        }
    }

    /// The methods each route answers, for 405 and `Allow`.
    var allowedMethods: [String] {
        switch self {
        case .sessions: ["GET", "POST"]
        case .session: ["GET", "DELETE"]
        case .action: ["POST"]
        case .events, .health, .metrics, .openAPI: ["GET"]
        }
    }

    /// The route as a template, for metrics and logs: never a raw id.
    var template: String {
        switch self {
        case .sessions: "/sessions"
        case .session: "/sessions/{id}"
        case .action(_, .drag): "/sessions/{id}/drag"
        case .action(_, .confirm): "/sessions/{id}/confirm"
        case .action(_, .dismiss): "/sessions/{id}/dismiss"
        case .action(_, .present): "/sessions/{id}/present"
        case .events: "/sessions/{id}/events"
        case .health: "/healthz"
        case .metrics: "/metrics"
        case .openAPI: "/openapi.yaml"
        }
    }
}
