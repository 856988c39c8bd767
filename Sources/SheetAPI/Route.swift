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
            guard path.hasPrefix("/sessions/") else { return nil }
            let parts = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            // "", "sessions", id[, tail]
            guard parts.count == 3 || parts.count == 4 else { return nil }
            let id = Substring(parts[2])
            guard !id.isEmpty else { return nil }
            if parts.count == 3 { self = .session(id); return }
            let tail = Substring(parts[3])
            if tail == "events" { self = .events(id); return }
            guard let action = Action(rawValue: String(tail)) else { return nil }
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
        case .action(_, let action): "/sessions/{id}/\(action.rawValue)"
        case .events: "/sessions/{id}/events"
        case .health: "/healthz"
        case .metrics: "/metrics"
        case .openAPI: "/openapi.yaml"
        }
    }
}
