/// The versions a conditional change accepts: HTTP's `If-Match` list of entity tags under the
/// strong comparison it uses. The change applies only while the session is at one of them, in
/// the same actor turn that applies it. Empty when no tag can ever match (each was weak, or not
/// a version of this server's): the change is then refused as a version mismatch.
public struct AcceptedVersions: Sendable, Hashable, ExpressibleByIntegerLiteral {
    public let versions: [UInt64]

    public init(_ versions: [UInt64]) { self.versions = versions }

    public init(integerLiteral value: UInt64) { versions = [value] }

    public func admits(_ version: UInt64) -> Bool { versions.contains(version) }
}
