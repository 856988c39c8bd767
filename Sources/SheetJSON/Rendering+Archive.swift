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

    /// The state a sheet starts without, as members to append to a stored sheet's object
    /// (`,"hasChanges":true,"stack":["root","edit"]`): the members a session answer has, under
    /// the same names, with the same writer.
    package static func extrasText(_ extras: ArchivedState.Extras) -> String {
        var writer = JSONWriter(capacity: 128)
        writer.beginObject()
        if extras.hasChanges { writer.key("hasChanges"); writer.bool(true) }
        if let height = extras.containerHeight { writer.key("containerHeight"); writer.number(height) }
        if let stack = extras.stack {
            writer.key("stack")
            writer.beginArray()
            for screen in stack { writer.string(screen) }
            writer.endArray()
        }
        if let parent = extras.parent { writer.key("parent"); optionalID(parent, into: &writer) }
        if let child = extras.child { writer.key("child"); optionalID(child, into: &writer) }
        writer.endObject()
        let object = writer.text
        return "," + object.dropFirst().dropLast()
    }
}
