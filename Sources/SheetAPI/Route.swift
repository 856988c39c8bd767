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
            // Parsed three times per request (preflight, answer, log): one scan over the
            // contiguous bytes, no splitting and no allocation.
            let scanned = path.utf8.withContiguousStorageIfAvailable { Route.scan($0) }
                ?? Array(path.utf8).withUnsafeBufferPointer { Route.scan($0) }
            guard let (idRange, tail) = scanned else {
                return nil
            }
            let utf8 = path.utf8
            let id = Substring(utf8[utf8.index(utf8.startIndex, offsetBy: idRange.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: idRange.upperBound)])
            switch tail {
            case nil: self = .session(id)
            case .events?: self = .events(id)
            case .action(let action)?: self = .action(id, action)
            }
        }
    }

    private enum Tail {
        case events
        case action(Action)
    }

    private static let prefix = Array("/sessions/".utf8)

    /// `/sessions/{id}` and `/sessions/{id}/{tail}`: the id's byte range and the tail, or nil.
    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> (Range<Int>, Tail?)? {
        guard bytes.count > prefix.count, bytes.starts(with: prefix) else { return nil }
        let idStart = prefix.count
        guard let slash = bytes[idStart...].firstIndex(of: UInt8(ascii: "/")) else {
            return (idStart..<bytes.count, nil)
        }
        let tail = bytes[(slash + 1)...]
        guard slash > idStart, !tail.contains(UInt8(ascii: "/")) else { return nil }
        let kind: Tail
        if tail.elementsEqual("events".utf8) { kind = .events }
        else if tail.elementsEqual("drag".utf8) { kind = .action(.drag) }
        else if tail.elementsEqual("confirm".utf8) { kind = .action(.confirm) }
        else if tail.elementsEqual("dismiss".utf8) { kind = .action(.dismiss) }
        else if tail.elementsEqual("present".utf8) { kind = .action(.present) }
        else { return nil }
        return (idStart..<slash, kind)
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
