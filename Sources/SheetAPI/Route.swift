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
        // Parsed three times per request (preflight, answer, log): one scan over the
        // contiguous bytes, no splitting, no String comparisons and no allocation.
        let scanned = path.utf8.withContiguousStorageIfAvailable { Route.scan($0) }
            ?? Array(path.utf8).withUnsafeBufferPointer { Route.scan($0) }
        switch scanned {
        case nil:
            return nil
        case .fixed(let route)?:
            self = route
        case .session(let idRange, let tail)?:
            let utf8 = path.utf8
            let start = utf8.index(utf8.startIndex, offsetBy: idRange.lowerBound)
            let id = Substring(utf8[start..<utf8.index(start, offsetBy: idRange.count)])
            switch tail {
            case nil: self = .session(id)
            case .events?: self = .events(id)
            case .action(let action)?: self = .action(id, action)
            }
        }
    }

    private enum Scanned {
        case fixed(Route)
        /// `/sessions/{id}` and `/sessions/{id}/{tail}`: the id's byte range and the tail.
        case session(Range<Int>, Tail?)
    }

    private enum Tail {
        case events
        case action(Action)
    }

    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Scanned? {
        let prefix: StaticString = "/sessions/"
        let prefixLength = prefix.utf8CodeUnitCount
        guard bytes.count > prefixLength else {
            if matches(bytes[...], "/sessions") { return .fixed(.sessions) }
            if matches(bytes[...], "/healthz") { return .fixed(.health) }
            if matches(bytes[...], "/metrics") { return .fixed(.metrics) }
            return nil
        }
        guard matches(bytes[..<prefixLength], prefix) else {
            return matches(bytes[...], "/openapi.yaml") ? .fixed(.openAPI) : nil
        }
        guard let slash = bytes[prefixLength...].firstIndex(of: UInt8(ascii: "/")) else {
            return .session(prefixLength..<bytes.count, nil)
        }
        let tail = bytes[(slash + 1)...]
        guard slash > prefixLength, !tail.contains(UInt8(ascii: "/")) else { return nil }
        let kind: Tail
        if matches(tail, "drag") { kind = .action(.drag) }
        else if matches(tail, "events") { kind = .events }
        else if matches(tail, "confirm") { kind = .action(.confirm) }
        else if matches(tail, "dismiss") { kind = .action(.dismiss) }
        else if matches(tail, "present") { kind = .action(.present) }
        else { return nil }
        return .session(prefixLength..<slash, kind)
    }

    private static func matches(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        let expected = text.utf8Start
        var offset = 0
        for byte in bytes {
            if byte != expected[offset] { return false }
            offset += 1
        }
        return true
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
