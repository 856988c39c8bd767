import AccessControl

/// Who may make requests, and how often: fixed at start, except the keys of a `KeyRing`, which
/// can be replaced while serving.
public struct AccessPolicy: Sendable {
    public enum Callers: Sendable {
        /// Every request but the open routes needs `Authorization: Bearer <key>` of a listed key.
        case keys(KeyRing)
        /// No keys: loopback clients only, all of the default tenant (protected mode).
        case loopback
        /// No keys, and every client is served (`--allow-unauthenticated`), as the default tenant.
        case anyone
    }

    public var callers: Callers = .anyone
    /// `--rate-limit`: nil is no limit.
    public var rateLimiter: RateLimiter?
    /// `--cors-origin`: browser origins whose pages may call the API.
    public var corsOrigins: [String] = []

    public init() {}
}

/// Why a request was refused before it reached its route, as counted in
/// `sheetd_auth_failures_total{reason}`.
enum AccessRefusal: String, CaseIterable, Sendable {
    case missingKey = "missing_key"
    case invalidHeader = "invalid_header"
    case unknownKey = "unknown_key"
    /// A known key whose role does not allow the request.
    case forbidden
    /// Protected mode: a client that is not on loopback.
    case authRequired = "auth_required"
    case rateLimited = "rate_limited"

    init(_ refusal: KeyRefusal) {
        switch refusal {
        case .missingKey: self = .missingKey
        case .invalidHeader: self = .invalidHeader
        case .unknownKey: self = .unknownKey
        }
    }
}
