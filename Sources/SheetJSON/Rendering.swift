import SessionStore
import SheetCore

/// The JSON shapes of the API, written by hand for speed: the one writer of sessions, events and
/// configurations, for answers and archives alike. SheetCore's `Decodable` conformances read
/// them back (a test round-trips every shape).
package enum Rendering {
    // The fixed shapes below spell their member names out with `member`, separators included,
    // write the commonest names as literals (`phase`, `detent`, `eventType`) and other enum names
    // and detents with `plainString` (they never need escaping), and copy what a configuration's
    // sessions show alike from `ConfigurationRenderings`: a drag's answer is rendered on every
    // request. `RenderingReferenceTests` holds every answer to a plain rendering, byte for byte.

    /// A session's answer; with `events`, also what a store that keeps the state as one document
    /// writes (`Sheet`'s `Decodable` reads it back and passes over the derived members).
    package static func session(_ snapshot: SessionSnapshot, into writer: inout JSONWriter,
                                events: ArraySlice<SheetEvent>? = nil) {
        let sheet = snapshot.sheet
        let rendering = ConfigurationRenderings.rendering(of: sheet.configuration)
        writer.beginObject()
        writer.member(#""id":"#); writer.unescapedString(length: SessionID.textLength, snapshot.id.writeDescription)
        writer.member(#","version":"#); writer.integer(sheet.version)
        writer.member(#","phase":"#); writer.phase(sheet.phase)
        writer.member(#","detent":"#); writer.detent(sheet.detent)
        writer.member(#","presentation":"#); writer.integer(sheet.presentation)
        writer.member(#","dismissReason":"#)
        if let reason = sheet.dismissReason { writer.plainString(reason.rawValue) } else { writer.null() }
        if let rendering, LaterState.stored(of: sheet) == nil {
            writer.append(rendering.startState)
        } else {
            stateMembers(LaterState(of: sheet), of: sheet, into: &writer)
        }
        writer.member(#","dimmed":"#); writer.bool(sheet.dimmed)
        writer.member(#","backgroundInteractive":"#); writer.bool(sheet.backgroundInteractive)
        writer.member(#","config":"#)
        if let rendering { writer.raw(rendering.config) } else { renderConfiguration(sheet.configuration, into: &writer) }
        writer.member(#","createdAt":"#); writer.timestamp(sheet.createdAt)
        writer.member(#","updatedAt":"#); writer.timestamp(sheet.updatedAt)
        if let events {
            writer.member(#","events":"#)
            writer.beginArray()
            for event in events { self.event(event, into: &writer) }
            writer.endArray()
        }
        writer.endObject()
    }

    /// The members from `hasChanges` through `thresholdActive`: the later state, then what the
    /// container height makes of the configuration's detents.
    static func stateMembers(_ later: LaterState, of sheet: Sheet, into writer: inout JSONWriter) {
        later.writeMembers(to: &writer)
        writer.member(#","heights":"#)
        writer.beginObject()
        for (detent, points) in sheet.heights {
            writer.detent(detent)
            writer.member(":")
            writer.number(points)
        }
        writer.endObject()
        writer.member(#","thresholdActive":"#); writer.bool(sheet.thresholdActive)
    }

    package static func optionalID(_ id: SessionID?, into writer: inout JSONWriter) {
        if let id { writer.unescapedString(length: SessionID.textLength, id.writeDescription) } else { writer.null() }
    }

    /// The `config` member: copied from the configuration's rendering when it has one.
    package static func configuration(_ configuration: SheetConfiguration, into writer: inout JSONWriter) {
        if let rendering = ConfigurationRenderings.rendering(of: configuration) {
            writer.raw(rendering.config)
        } else {
            renderConfiguration(configuration, into: &writer)
        }
    }

    /// The `config` member, rendered (what `configuration(_:into:)` copies).
    package static func renderConfiguration(_ configuration: SheetConfiguration, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member(#""detents":"#)
        writer.beginArray()
        for detent in configuration.detents { writer.plainString(detent.description) }
        writer.endArray()
        writer.member(#","defaultDetent":"#); writer.plainString(configuration.defaultDetent.description)
        writer.member(#","thresholdDetent":"#)
        if let threshold = configuration.thresholdDetent { writer.plainString(threshold.description) } else { writer.null() }
        writer.member(#","dismissPolicy":"#); writer.plainString(configuration.dismissPolicy.rawValue)
        writer.member(#","interceptAction":"#); writer.plainString(configuration.interceptAction.rawValue)
        writer.member(#","containerHeight":"#); writer.number(configuration.containerHeight)
        writer.member(#","decelerationRate":"#); writer.plainString(configuration.decelerationRate.rawValue)
        writer.member(#","protectWhen":"#); writer.plainString(configuration.protectWhen.rawValue)
        writer.member(#","largestUndimmedDetent":"#)
        if let undimmed = configuration.largestUndimmedDetent { writer.plainString(undimmed.description) } else { writer.null() }
        writer.member(#","rootScreen":"#); writer.plainString(configuration.rootScreen)
        writer.endObject()
    }

    package static func gesture(_ gesture: GestureResolution, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member(#""releasedHeight":"#); writer.number(gesture.releasedHeight)
        writer.member(#","projectedHeight":"#); writer.number(gesture.projectedHeight)
        writer.member(#","target":"#); writer.plainString(gesture.target.description)
        writer.endObject()
    }

    package static func event(_ event: SheetEvent, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member(#""seq":"#); writer.integer(event.seq)
        writer.member(#","type":"#); writer.eventType(event.kind.type)
        writer.member(#","at":"#); writer.timestamp(event.at)
        event.kind.writeMembers(to: &writer)
        if let gesture = event.gesture {
            writer.member(#","gesture":"#); self.gesture(gesture, into: &writer)
        }
        writer.endObject()
    }

    package static func events(_ events: [SheetEvent], into writer: inout JSONWriter) {
        writer.beginArray()
        for event in events { self.event(event, into: &writer) }
        writer.endArray()
    }

    /// A session is 650 to 900 bytes: written in place into an array of `pooledCapacity`.
    package static func sessionBody(_ snapshot: SessionSnapshot) -> [UInt8] {
        JSONWriter.bytes { writer in session(snapshot, into: &writer) }
    }

    /// A drag's answer is 780 to 1,100 bytes: written in place into an array of `pooledCapacity`
    /// (a longer one moves to a buffer of the writer's own as it grows, and is copied out once).
    package static func actionBody(_ result: ActionResult) -> [UInt8] {
        JSONWriter.bytes { writer in
            writer.beginObject()
            writer.member(#""session":"#); session(result.session, into: &writer)
            writer.member(#","events":"#); events(result.outcome.events, into: &writer)
            if let gesture = result.outcome.gesture {
                writer.member(#","gesture":"#); self.gesture(gesture, into: &writer)
            }
            writer.endObject()
        }
    }

    package static func eventsBody(_ page: EventsPage) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + page.events.count * 128)
        writer.beginObject()
        writer.key("events"); events(page.events, into: &writer)
        writer.key("version"); writer.integer(page.version)
        writer.endObject()
        return writer.bytes
    }

    package static func listBody(_ page: SessionPage, cursor: (UInt64) -> String) -> [UInt8] {
        var writer = JSONWriter(capacity: 128 + page.sessions.count * 512)
        writer.beginObject()
        writer.key("sessions")
        writer.beginArray()
        for snapshot in page.sessions { session(snapshot, into: &writer) }
        writer.endArray()
        writer.key("next")
        if let next = page.next { writer.string(cursor(next)) } else { writer.null() }
        writer.endObject()
        return writer.bytes
    }

    package static func errorBody(_ error: APIError, requestID: String) -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.key("error")
        writer.beginObject()
        writer.key("code"); writer.string(error.code.rawValue)
        writer.key("message"); writer.string(error.message)
        if let field = error.field { writer.key("field"); writer.string(field) }
        writer.key("requestId"); writer.string(requestID)
        writer.endObject()
        if let session = error.session { writer.key("session"); self.session(session, into: &writer) }
        writer.endObject()
        return writer.bytes
    }
}

/// The names of the states and kinds an answer shows in every session and event, each written
/// as one copy of a literal, quotes included, instead of from its `rawValue` String
/// (`RenderingTests` checks each against `rawValue`).
extension JSONWriter {
    package mutating func phase(_ phase: Phase) {
        switch phase {
        case .presented: quoted(#""presented""#)
        case .confirming: quoted(#""confirming""#)
        case .dismissed: quoted(#""dismissed""#)
        }
    }

    /// `large` and `medium` as literals, the others from their description.
    package mutating func detent(_ detent: Detent) {
        switch detent {
        case .large: quoted(#""large""#)
        case .medium: quoted(#""medium""#)
        case .fraction, .height: plainString(detent.description)
        }
    }

    package mutating func eventType(_ type: SheetEvent.EventType) {
        switch type {
        case .presented: quoted(#""presented""#)
        case .detentChanged: quoted(#""detentChanged""#)
        case .intercepted: quoted(#""intercepted""#)
        case .confirmationCancelled: quoted(#""confirmationCancelled""#)
        case .dismissBlocked: quoted(#""dismissBlocked""#)
        case .dismissed: quoted(#""dismissed""#)
        case .changesMarked: quoted(#""changesMarked""#)
        case .resized: quoted(#""resized""#)
        case .pushed: quoted(#""pushed""#)
        case .popped: quoted(#""popped""#)
        case .covered: quoted(#""covered""#)
        case .uncovered: quoted(#""uncovered""#)
        }
    }
}

/// Each member inlined into the kind's or the later state's `writeMembers`, specialised here, so
/// the key is a copy of known length.
extension JSONWriter: SheetMemberWriter {
    @inline(__always)
    public mutating func member(_ key: StaticString, string: String) {
        self.key(key)
        plainString(string)
    }

    @inline(__always)
    public mutating func member(_ key: StaticString, integer: Int) {
        self.key(key)
        self.integer(integer)
    }

    @inline(__always)
    public mutating func member(_ key: StaticString, bool: Bool) {
        self.key(key)
        self.bool(bool)
    }

    @inline(__always)
    public mutating func member(_ key: StaticString, number: Double) {
        self.key(key)
        self.number(number)
    }

    @inline(__always)
    public mutating func member(_ key: StaticString, strings: [String]) {
        self.key(key)
        beginArray()
        for string in strings { plainString(string) }
        endArray()
    }

    @inline(__always)
    public mutating func member(_ key: StaticString, id: SessionID?) {
        self.key(key)
        Rendering.optionalID(id, into: &self)
    }
}
