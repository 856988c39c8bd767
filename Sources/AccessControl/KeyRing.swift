import Locking

/// Who made a request, as its key says.
public struct Caller: Sendable, Equatable {
    public let tenant: String
    public let role: Role
    /// The first 64 bits of the key's digest: names the key's rate-limit bucket, the same across
    /// reloads of the keys file, without keeping the key.
    public let keyTag: UInt64

    public init(tenant: String, role: Role, keyTag: UInt64) {
        self.tenant = tenant
        self.role = role
        self.keyTag = keyTag
    }
}

/// Why a request's key was not accepted. A struct around the package's enum, so a client
/// compares refusals and a new one never breaks its `switch`.
public struct KeyRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Base: String, Sendable {
        /// No `Authorization` header.
        case missingKey = "missing_key"
        /// An `Authorization` header that is not `Bearer <token>`.
        case invalidHeader = "invalid_header"
        /// A well-formed key that no line of the keys file lists.
        case unknownKey = "unknown_key"
    }

    package let base: Base
    package init(_ base: Base) { self.base = base }
    /// The refusal as metrics and logs name it, e.g. `missing_key`.
    public var rawValue: String { base.rawValue }
    public var description: String { base.rawValue }

    public static let missingKey = KeyRefusal(.missingKey)
    public static let invalidHeader = KeyRefusal(.invalidHeader)
    public static let unknownKey = KeyRefusal(.unknownKey)
}

/// The keys sheetd accepts, replaceable as a whole while requests are served (SIGHUP).
public final class KeyRing: Sendable {
    private let entries: LockedValue<[KeyEntry]>

    public init(_ entries: [KeyEntry]) {
        self.entries = LockedValue(entries)
    }

    public var count: Int { entries.withLock { $0.count } }

    /// Tenants named in the file now (for messages and metrics).
    public var tenants: Set<String> { entries.withLock { Set($0.map(\.tenant)) } }

    /// Takes the new keys at once: a request checked after this returns sees only them.
    public func replace(with newEntries: [KeyEntry]) {
        entries.withLock { $0 = newEntries }
    }

    /// The caller an `Authorization` header value names.
    ///
    /// The presented key is hashed, and it is the digest that is looked up, never the key: every
    /// entry is compared with `KeyDigest.matches` (a full-length XOR-accumulate, no early exit),
    /// the loop visits every entry whatever matched, and the match is picked without a branch
    /// on the comparison. So how long this takes depends on the number of keys, not on how close
    /// a guess came to any of them.
    public func caller(authorization: String?) -> Result<Caller, KeyRefusal> {
        guard let authorization else { return .failure(.missingKey) }
        guard let token = Self.bearerToken(authorization) else { return .failure(.invalidHeader) }
        let digest = KeyDigest(ofKey: token.utf8)
        return entries.withLock { entries in
            var found = -1
            for index in entries.indices {
                let same = entries[index].digest.matches(digest)
                // found = same ? index : found, as arithmetic: mask is all ones when same.
                let mask = 0 &- Int(same ? 1 : 0)
                found = (index & mask) | (found & ~mask)
            }
            guard found >= 0 else { return .failure(.unknownKey) }
            let entry = entries[found]
            return .success(Caller(tenant: entry.tenant, role: entry.role, keyTag: entry.digest.words.0))
        }
    }

    /// The token of `Bearer <token>` (scheme case-insensitive, RFC 6750's token68 characters),
    /// or nil for anything else.
    static func bearerToken(_ value: String) -> Substring? {
        let scheme = "bearer "
        guard value.utf8.count > scheme.utf8.count, value.utf8.count <= 1024,
              value.prefix(scheme.count).lowercased() == scheme else { return nil }
        let token = value.dropFirst(scheme.count).drop(while: { $0 == " " })
        guard !token.isEmpty, token.utf8.allSatisfy(isToken68) else { return nil }
        return token
    }

    private static func isToken68(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
            true
        default:
            false
        }
    }
}
