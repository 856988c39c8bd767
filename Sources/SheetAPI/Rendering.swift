import SessionStore
import SheetCore

/// The JSON shapes of the API, written by hand for speed. They must equal what SheetCore's
/// `Codable` conformances produce (a test compares the two).
enum Rendering {
    static func session(_ snapshot: SessionSnapshot, into writer: inout JSONWriter) {
        let sheet = snapshot.sheet
        writer.beginObject()
        writer.key("id"); writer.unescapedString(length: SessionID.textLength, snapshot.id.writeDescription)
        writer.key("version"); writer.integer(sheet.version)
        writer.key("phase"); writer.string(sheet.phase.rawValue)
        writer.key("detent"); writer.string(sheet.detent.description)
        writer.key("presentation"); writer.integer(sheet.presentation)
        writer.key("dismissReason")
        if let reason = sheet.dismissReason { writer.string(reason.rawValue) } else { writer.null() }
        writer.key("config"); configuration(sheet.configuration, into: &writer)
        writer.key("createdAt"); writer.unescapedString(length: Timestamp.rfc3339Length, sheet.createdAt.writeRFC3339)
        writer.key("updatedAt"); writer.unescapedString(length: Timestamp.rfc3339Length, sheet.updatedAt.writeRFC3339)
        writer.endObject()
    }

    static func configuration(_ configuration: SheetConfiguration, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("detents")
        writer.beginArray()
        for detent in configuration.detents { writer.string(detent.description) }
        writer.endArray()
        writer.key("defaultDetent"); writer.string(configuration.defaultDetent.description)
        writer.key("thresholdDetent")
        if let threshold = configuration.thresholdDetent { writer.string(threshold.description) } else { writer.null() }
        writer.key("dismissPolicy"); writer.string(configuration.dismissPolicy.rawValue)
        writer.key("interceptAction"); writer.string(configuration.interceptAction.rawValue)
        writer.key("containerHeight"); writer.number(configuration.containerHeight)
        writer.key("decelerationRate"); writer.string(configuration.decelerationRate.rawValue)
        writer.endObject()
    }

    static func gesture(_ gesture: GestureResolution, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("releasedHeight"); writer.number(gesture.releasedHeight)
        writer.key("projectedHeight"); writer.number(gesture.projectedHeight)
        writer.key("target"); writer.string(gesture.target.description)
        writer.endObject()
    }

    static func event(_ event: SheetEvent, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("seq"); writer.integer(event.seq)
        writer.key("type"); writer.string(event.kind.type)
        writer.key("at"); writer.unescapedString(length: Timestamp.rfc3339Length, event.at.writeRFC3339)
        switch event.kind {
        case .presented(let detent, let presentation):
            writer.key("detent"); writer.string(detent.description)
            writer.key("presentation"); writer.integer(presentation)
        case .detentChanged(let from, let to):
            writer.key("from"); writer.string(from.description)
            writer.key("to"); writer.string(to.description)
        case .intercepted(let attempted, let restoredTo):
            writer.key("attempted"); writer.string(attempted.description)
            writer.key("restoredTo"); writer.string(restoredTo.description)
        case .confirmationCancelled(let detent):
            writer.key("detent"); writer.string(detent.description)
        case .dismissBlocked(let attempted):
            writer.key("attempted"); writer.string(attempted.description)
        case .dismissed(let reason):
            writer.key("reason"); writer.string(reason.rawValue)
        }
        if let gesture = event.gesture {
            writer.key("gesture"); self.gesture(gesture, into: &writer)
        }
        writer.endObject()
    }

    static func events(_ events: [SheetEvent], into writer: inout JSONWriter) {
        writer.beginArray()
        for event in events { self.event(event, into: &writer) }
        writer.endArray()
    }

    static func sessionBody(_ snapshot: SessionSnapshot) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        session(snapshot, into: &writer)
        return writer.bytes
    }

    static func actionBody(_ result: ActionResult) -> [UInt8] {
        var writer = JSONWriter(capacity: 768)
        writer.beginObject()
        writer.key("session"); session(result.session, into: &writer)
        writer.key("events"); events(result.outcome.events, into: &writer)
        if let gesture = result.outcome.gesture {
            writer.key("gesture"); self.gesture(gesture, into: &writer)
        }
        writer.endObject()
        return writer.bytes
    }

    static func eventsBody(_ page: EventsPage) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + page.events.count * 128)
        writer.beginObject()
        writer.key("events"); events(page.events, into: &writer)
        writer.key("version"); writer.integer(page.version)
        writer.endObject()
        return writer.bytes
    }

    static func listBody(_ page: SessionPage, cursor: (UInt64) -> String) -> [UInt8] {
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

    static func errorBody(_ error: APIError, requestID: String) -> [UInt8] {
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
