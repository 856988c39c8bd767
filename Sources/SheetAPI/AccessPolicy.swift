import AccessControl
import SheetObservability

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

extension AccessRefusal {
    init(_ refusal: KeyRefusal) {
        switch refusal.base {
        case .missingKey: self = .missingKey
        case .invalidHeader: self = .invalidHeader
        case .unknownKey: self = .unknownKey
        }
    }
}
