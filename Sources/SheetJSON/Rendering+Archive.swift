import SessionStore
import SheetCore

/// What a durable archive stores as JSON, written by the same code as the API's answers, so an
/// event or a configuration has one JSON form wherever it is kept or sent.
extension Rendering {
    /// A session as one document: its answer with `events` (the newest `retained` of them) beside
    /// the state; `Sheet`'s `Decodable` reads it back.
    package static func storedSessionText(_ snapshot: SessionSnapshot, retained: Int = Sheet.retainedEvents) -> String {
        var writer = JSONWriter(capacity: 768 + min(retained, snapshot.sheet.events.count) * 128)
        session(snapshot, into: &writer, events: ArraySlice(snapshot.sheet.events.suffix(max(1, retained))))
        return writer.text
    }

    /// An event as the API answers it; `SheetEvent`'s `Decodable` reads it back.
    package static func eventText(_ event: SheetEvent) -> String {
        var writer = JSONWriter(capacity: 192)
        self.event(event, into: &writer)
        return writer.text
    }

    /// A configuration as a session's `config` member; `SheetConfiguration`'s `Decodable` reads it back.
    package static func configurationText(_ configuration: SheetConfiguration) -> String {
        var writer = JSONWriter(capacity: 384)
        self.configuration(configuration, into: &writer)
        return writer.text
    }

    /// The later state, as members to append to a stored sheet's object
    /// (`,"hasChanges":true,"containerHeight":844,...`): the members a session answer has, listed
    /// by `LaterState` and written by the same writer; `LaterState`'s `Decodable` reads them back.
    package static func extrasText(_ extras: LaterState) -> String {
        var writer = JSONWriter(capacity: 128)
        writer.beginObject()
        extras.writeMembers(to: &writer)
        writer.endObject()
        let object = writer.text
        return "," + object.dropFirst().dropLast()
    }
}
