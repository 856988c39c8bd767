/// Takes members of an event kind (after `seq`, `type` and `at`) or of a sheet's later state.
/// The API's JSON writer, which also writes the archives' text, implements it, so each kind's
/// members are listed once, in `SheetEvent.Kind.writeMembers(to:)`, and the later state's in
/// `LaterState.writeMembers(to:)`, in SheetCore beside the decoders that read them.
public protocol SheetMemberWriter: ~Copyable {
    /// A string member; the values given here never need JSON escaping (detents, enum names).
    mutating func member(_ key: StaticString, string: String)
    mutating func member(_ key: StaticString, integer: Int)
    mutating func member(_ key: StaticString, bool: Bool)
    /// Points: an integer when whole, else the shortest decimal.
    mutating func member(_ key: StaticString, number: Double)
    /// Screen names, which never need escaping either.
    mutating func member(_ key: StaticString, strings: [String])
    /// A session id, or `null`.
    mutating func member(_ key: StaticString, id: SessionID?)
}

extension SheetEvent.Kind {
    /// The kind's members, in the order the API documents them. Inlinable so that each writer
    /// gets its own specialised copy (the API renders one per event on every drag).
    @inlinable
    public func writeMembers(to writer: inout some SheetMemberWriter & ~Copyable) {
        switch self {
        case let .presented(detent, presentation):
            writer.member("detent", string: detent.description)
            writer.member("presentation", integer: presentation)
        case let .detentChanged(from, to, by):
            writer.member("from", string: from.description)
            writer.member("to", string: to.description)
            writer.member("by", string: by.rawValue)
        case let .intercepted(attempted, restoredTo):
            writer.member("attempted", string: attempted.description)
            writer.member("restoredTo", string: restoredTo.description)
        case let .confirmationCancelled(detent):
            writer.member("detent", string: detent.description)
        case let .dismissBlocked(attempted):
            writer.member("attempted", string: attempted.description)
        case let .dismissed(reason, screen):
            writer.member("reason", string: reason.rawValue)
            writer.member("screen", string: screen)
        case let .changesMarked(hasChanges):
            writer.member("hasChanges", bool: hasChanges)
        case let .resized(from, to):
            writer.member("from", number: from)
            writer.member("to", number: to)
        case let .pushed(screen, depth):
            writer.member("screen", string: screen)
            writer.member("depth", integer: depth)
        case let .popped(screens, depth):
            writer.member("screens", strings: screens)
            writer.member("depth", integer: depth)
        case let .covered(child):
            writer.member("child", string: child.description)
        case let .uncovered(child, reason):
            writer.member("child", string: child.description)
            writer.member("reason", string: reason.rawValue)
        }
    }
}
