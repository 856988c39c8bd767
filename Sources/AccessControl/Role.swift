/// What a key may do. Each key in the keys file has exactly one role.
public enum Role: String, CaseIterable, Sendable {
    /// Everything on its own tenant's sessions: create, read, change, delete, events.
    case app
    /// Reads its own tenant's sessions: a session, the list, events (long-poll and stream).
    case observer
    /// `/metrics`, nothing about sessions.
    case `operator`

    /// Whether a key of this role may make a request that needs `access`.
    public func allows(_ access: RequiredAccess) -> Bool {
        switch (self, access) {
        case (_, .open): true
        case (.app, .readSessions), (.app, .changeSessions): true
        case (.observer, .readSessions): true
        case (.operator, .readMetrics): true
        default: false
        }
    }
}

/// What a route asks of its caller; every route declares one.
public enum RequiredAccess: Sendable, Equatable {
    /// No key needed (`/healthz`, `/openapi.yaml`).
    case open
    case readSessions
    case changeSessions
    case readMetrics
}
