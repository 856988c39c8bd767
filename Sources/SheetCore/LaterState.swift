/// The state only the newer actions change: unsaved changes, a resized container, the navigation
/// stack and the chain of sheets. Listed once, here: the answer writes these members, an archive
/// that keeps the first state in columns stores them beside it, and both stores read them back
/// with this type's decoder, so a new member of it touches this file and `Sheet` alone.
public struct LaterState: Hashable, Sendable, Decodable {
    /// nil in a stored value: the member was not stored, and takes the value a new sheet has.
    public var hasChanges: Bool?
    public var containerHeight: Double?
    public var stack: [String]?
    public var parent: SessionID?
    public var child: SessionID?

    /// Nothing stored: every member takes the value a new sheet has.
    public init() {}

    /// The whole of it, as an answer shows it.
    @inlinable
    public init(of sheet: Sheet) {
        hasChanges = sheet.hasChanges
        containerHeight = sheet.containerHeight
        stack = sheet.stack
        parent = sheet.parent
        child = sheet.child
    }

    /// What a store keeps: nil for a sheet whose later state is all start values (most sessions,
    /// whose rows then store nothing for it), else the whole of it.
    public static func stored(of sheet: Sheet) -> LaterState? {
        let configuration = sheet.configuration
        guard sheet.hasChanges || sheet.containerHeight != configuration.containerHeight
                || sheet.stack != configuration.storage.rootStack || sheet.parent != nil || sheet.child != nil else { return nil }
        return LaterState(of: sheet)
    }

    /// The members, in the order the API documents them; a chain member is `null` when absent, a
    /// member never set is left out. Inlinable so each writer gets its own specialised copy.
    @inlinable
    public func writeMembers(to writer: inout some SheetMemberWriter & ~Copyable) {
        if let hasChanges { writer.member("hasChanges", bool: hasChanges) }
        if let containerHeight { writer.member("containerHeight", number: containerHeight) }
        if let stack { writer.member("stack", strings: stack) }
        writer.member("parent", id: parent)
        writer.member("child", id: child)
    }

    private enum CodingKeys: String, CodingKey { case hasChanges, containerHeight, stack, parent, child }

    /// Reads the members from the object they were written into (a session's, or a stored row's
    /// own); a missing one stays nil.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func id(_ key: CodingKeys) throws -> SessionID? {
            guard let text = try c.decodeIfPresent(String.self, forKey: key) else { return nil }
            guard let id = SessionID(text) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "\"\(text)\" is not a session id")
            }
            return id
        }
        hasChanges = try c.decodeIfPresent(Bool.self, forKey: .hasChanges)
        containerHeight = try c.decodeIfPresent(Double.self, forKey: .containerHeight)
        stack = try c.decodeIfPresent([String].self, forKey: .stack)
        parent = try id(.parent)
        child = try id(.child)
    }
}
