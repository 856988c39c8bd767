/// Takes an event kind's own members, after `seq`, `type` and `at`. Every writer of events (the
/// API's JSON, the archive's text, `Codable`) implements it, so each kind's members are listed
/// once, in `SheetEvent.Kind.writeMembers(to:)`.
public protocol SheetEventMemberWriter: ~Copyable {
    /// A string member; the values given here never need JSON escaping (detents, enum names).
    mutating func member(_ key: StaticString, string: String)
    mutating func member(_ key: StaticString, integer: Int)
}

extension SheetEvent.Kind {
    /// The kind's members, in the order the API documents them. Inlinable so that each writer
    /// gets its own specialised copy (the API renders one per event on every drag).
    @inlinable
    public func writeMembers(to writer: inout some SheetEventMemberWriter & ~Copyable) {
        switch self {
        case let .presented(detent, presentation):
            writer.member("detent", string: detent.description)
            writer.member("presentation", integer: presentation)
        case let .detentChanged(from, to):
            writer.member("from", string: from.description)
            writer.member("to", string: to.description)
        case let .intercepted(attempted, restoredTo):
            writer.member("attempted", string: attempted.description)
            writer.member("restoredTo", string: restoredTo.description)
        case let .confirmationCancelled(detent):
            writer.member("detent", string: detent.description)
        case let .dismissBlocked(attempted):
            writer.member("attempted", string: attempted.description)
        case let .dismissed(reason):
            writer.member("reason", string: reason.rawValue)
        }
    }
}
