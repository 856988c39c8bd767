/// Why a request was refused before it reached its route, as counted in
/// `sheetd_auth_failures_total{reason}`.
package enum AccessRefusal: String, CaseIterable, Sendable {
    case missingKey = "missing_key"
    case invalidHeader = "invalid_header"
    case unknownKey = "unknown_key"
    /// A known key whose role does not allow the request.
    case forbidden
    /// Protected mode: a client that is not on loopback.
    case authRequired = "auth_required"
    case rateLimited = "rate_limited"
}
