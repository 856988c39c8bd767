/// Whom a session belongs to: the tenant of the key that created it. A session is found only
/// under its own tenant; to any other it does not exist.
public struct Tenant: Hashable, Sendable, CustomStringConvertible {
    public let name: String

    public init(_ name: String) {
        self.name = name
    }

    /// The tenant of every request when sheetd runs without keys, and of the sessions a data
    /// file from before tenants holds. A key file line with this tenant reaches them.
    public static let `default` = Tenant("default")

    public var description: String { name }
}
