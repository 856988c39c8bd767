import SheetCore

/// A request body that must be a JSON object, with the checks every route shares: valid JSON,
/// an object, no field the route does not know, each field of the right type.
package struct BodyObject {
    package let members: [(key: String, value: JSONValue)]

    /// An empty (or all-whitespace) body is an empty object: "all defaults".
    package static func parse(_ body: [UInt8]) throws(APIError) -> BodyObject {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            return BodyObject(members: [])
        }
        let value: JSONValue
        do { value = try JSONParser.parse(body) } catch {
            throw APIError(.invalidJSON, "The body is not valid JSON: \(error.message).")
        }
        guard case .object(let members) = value else {
            throw APIError(.invalidJSON, "The body must be a JSON object, not \(value.kindName).")
        }
        return BodyObject(members: members)
    }

    /// `known` is an array, not a set: a handful of names, checked on every request, where
    /// building a set would hash each one first.
    package func rejectUnknown(_ known: [String]) throws(APIError) {
        for member in members where !known.contains(member.key) {
            let list = known.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            let hint = known.isEmpty ? "this request takes no fields" : "known fields are \(list)"
            throw APIError(.unknownField, "Unknown field \"\(member.key)\"; \(hint).", field: member.key)
        }
    }

    /// The member, or nil when absent. `null` is a value like any other (and a wrong type for
    /// every field but `thresholdDetent` and `largestUndimmedDetent`, where it means "none").
    subscript(key: String) -> JSONValue? {
        members.first(where: { $0.key == key })?.value
    }

    package func string(_ key: String) throws(APIError) -> String? {
        guard let value = self[key] else { return nil }
        guard case .string(let text) = value else {
            throw APIError.invalidField(key, "\"\(key)\" must be a string, not \(value.kindName).")
        }
        return text
    }

    package func number(_ key: String) throws(APIError) -> Double? {
        guard let value = self[key] else { return nil }
        guard case .number(let number) = value else {
            throw APIError.invalidField(key, "\"\(key)\" must be a number, not \(value.kindName).")
        }
        return number
    }

    package func detent(_ key: String) throws(APIError) -> Detent? {
        guard let text = try string(key) else { return nil }
        do { return try Detent(parsing: text) } catch {
            throw APIError(.invalidDetent, "\"\(key)\": \(error.message)", field: key)
        }
    }

    /// A detent, or nil when absent or `null` ("none").
    package func nullableDetent(_ key: String) throws(APIError) -> Detent? {
        if case .null? = self[key] { return nil }
        return try detent(key)
    }

    package func choice<T: RawRepresentable & CaseIterable>(_ key: String, as type: T.Type) throws(APIError) -> T? where T.RawValue == String {
        guard let text = try string(key) else { return nil }
        guard let value = T(rawValue: text) else {
            let options = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw APIError.invalidField(key, "\"\(key)\" must be one of \(options), not \"\(text)\".")
        }
        return value
    }
}

/// The bodies of each route, decoded into SheetCore values.
package enum RequestBodies {
    package static func configuration(_ body: [UInt8]) throws(APIError) -> SheetConfiguration {
        try creation(body).configuration
    }

    /// `POST /sessions`: the configuration, and the session to present the new one over
    /// (`parent`: an id, or `null`/absent for none). A body seen lately decodes as it did then
    /// (`RecentCreations`).
    package static func creation(_ body: [UInt8]) throws(APIError) -> (configuration: SheetConfiguration, parent: SessionID?) {
        guard let fingerprint = RecentCreations.fingerprint(body) else { return try decodeCreation(body) }
        let recent = RecentCreations.decoded(body, fingerprint: fingerprint)
        if let decoded = recent.decoded { return decoded }
        let decoded = try decodeCreation(body)
        if recent.remember {
            RecentCreations.remember(body, fingerprint: fingerprint, configuration: decoded.configuration, parent: decoded.parent)
        }
        return decoded
    }

    /// `creation`, decoded from the body every time.
    package static func decodeCreation(_ body: [UInt8]) throws(APIError) -> (configuration: SheetConfiguration, parent: SessionID?) {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown([
            "detents", "defaultDetent", "thresholdDetent", "dismissPolicy", "interceptAction",
            "containerHeight", "decelerationRate", "protectWhen", "largestUndimmedDetent", "rootScreen", "parent",
        ])
        var parent: SessionID?
        if let value = object["parent"], value != .null {
            guard case .string(let text) = value else {
                throw APIError.invalidField("parent", "\"parent\" must be a session id (a string) or null, not \(value.kindName).")
            }
            guard let id = SessionID(text) else {
                throw APIError.invalidField("parent", "\"parent\": \"\(text)\" is no session of this server.")
            }
            parent = id
        }
        return (try configuration(of: object), parent)
    }

    private static func configuration(of object: BodyObject) throws(APIError) -> SheetConfiguration {
        var detents: [Detent]?
        if let value = object["detents"] {
            guard case .array(let items) = value else {
                throw APIError.invalidField("detents", "\"detents\" must be an array of detent strings, not \(value.kindName).")
            }
            var parsed: [Detent] = []
            for (index, item) in items.enumerated() {
                guard case .string(let text) = item else {
                    throw APIError.invalidField("detents", "\"detents\"[\(index)] must be a string, not \(item.kindName).")
                }
                do { parsed.append(try Detent(parsing: text)) } catch {
                    throw APIError(.invalidDetent, "\"detents\"[\(index)]: \(error.message)", field: "detents")
                }
            }
            detents = parsed
        }
        let defaultDetent = try object.detent("defaultDetent")
        let thresholdDetent = try object.nullableDetent("thresholdDetent")
        let dismissPolicy = try object.choice("dismissPolicy", as: DismissPolicy.self)
        let interceptAction = try object.choice("interceptAction", as: InterceptAction.self)
        let containerHeight = try object.number("containerHeight")
        let decelerationRate = try object.choice("decelerationRate", as: DecelerationRate.self)
        let protectWhen = try object.choice("protectWhen", as: ProtectWhen.self)
        let undimmed = try object.nullableDetent("largestUndimmedDetent")
        let rootScreen = try object.string("rootScreen")
        do {
            return try SheetConfiguration(
                detents: detents, defaultDetent: defaultDetent, thresholdDetent: thresholdDetent,
                dismissPolicy: dismissPolicy, interceptAction: interceptAction,
                containerHeight: containerHeight, decelerationRate: decelerationRate,
                protectWhen: protectWhen, largestUndimmedDetent: undimmed, rootScreen: rootScreen)
        } catch {
            throw APIError(error.code == .unknownDetent ? SheetError.Code.unknownDetent : .invalidField, error.message, field: error.field)
        }
    }

    /// `{"to": target}` or `{"translation": T, "velocity": V}`: exactly one form.
    package static func drag(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown(["to", "translation", "velocity"])
        let to = try object.string("to")
        let translation = try object.number("translation")
        let velocity = try object.number("velocity")
        switch (to, translation) {
        case (.some, .some):
            throw APIError.invalidField("to", "Give either \"to\" or \"translation\" (with \"velocity\"), not both.")
        case (.none, .none):
            let field = velocity == nil ? "to" : "translation"
            throw APIError.invalidField(field, "A drag needs \"to\" (a detent or \"closed\") or \"translation\" (points, with an optional \"velocity\").")
        case (.some(let text), .none):
            if velocity != nil {
                throw APIError.invalidField("velocity", "\"velocity\" goes with \"translation\", not with \"to\".")
            }
            do { return .drag(try DragTarget(parsing: text)) } catch {
                throw APIError(.invalidDetent, "\"to\": \(error.message)", field: "to")
            }
        case (.none, .some(let translation)):
            let velocity = velocity ?? 0
            try checkMagnitude(translation, field: "translation")
            try checkMagnitude(velocity, field: "velocity")
            return .gesture(DragGesture(translation: translation, velocity: velocity))
        }
    }

    private static func checkMagnitude(_ value: Double, field: String) throws(APIError) {
        guard value.isFinite, abs(value) <= DragGesture.maximumMagnitude else {
            throw APIError.invalidField(field, "\"\(field)\" must be a finite number between -100000 and 100000.")
        }
    }

    package static func confirm(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown(["action"])
        guard let action = try object.choice("action", as: ConfirmAction.self) else {
            throw APIError.invalidField("action", "\"action\" is required: \"discard\", \"save\" or \"cancel\".")
        }
        return .confirm(action)
    }

    package static func dismiss(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown(["reason"])
        return .dismiss(try object.choice("reason", as: AppDismissReason.self) ?? .programmatic)
    }

    package static func present(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown([])
        return .present
    }

    /// `{"hasChanges": true|false}`.
    package static func changes(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown(["hasChanges"])
        guard let value = object["hasChanges"] else {
            throw APIError.invalidField("hasChanges", "\"hasChanges\" is required: true or false.")
        }
        guard case .bool(let hasChanges) = value else {
            throw APIError.invalidField("hasChanges", "\"hasChanges\" must be true or false, not \(value.kindName).")
        }
        return .changes(hasChanges: hasChanges)
    }

    /// `{"detent": D}`: a detent of the session, not its threshold (the sheet checks both).
    package static func select(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown(["detent"])
        guard let detent = try object.detent("detent") else {
            throw APIError.invalidField("detent", "\"detent\" is required: one of the session's detents.")
        }
        return .select(detent)
    }

    /// `{"containerHeight": H}`, 1 to 10000 points.
    package static func resize(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown(["containerHeight"])
        guard let height = try object.number("containerHeight") else {
            throw APIError.invalidField("containerHeight", "\"containerHeight\" is required: points, 1 to 10000.")
        }
        guard height.isFinite, SheetConfiguration.containerHeightRange.contains(height) else {
            throw APIError.invalidField("containerHeight", "\"containerHeight\" must be a number of points from 1 to 10000.")
        }
        return .resize(containerHeight: height)
    }

    /// Exactly one of `{"push": "<screen>"}` and `{"pop": N}` (a whole number, at least 1).
    package static func navigate(_ body: [UInt8]) throws(APIError) -> SheetAction {
        let object = try BodyObject.parse(body)
        try object.rejectUnknown(["push", "pop"])
        let push = try object.string("push")
        let pop = try object.number("pop")
        switch (push, pop) {
        case (.some, .some):
            throw APIError.invalidField("pop", "Give either \"push\" or \"pop\", not both.")
        case (.none, .none):
            throw APIError.invalidField("push", "A navigation needs \"push\" (a screen name) or \"pop\" (how many screens).")
        case (.some(let screen), .none):
            if let problem = NavigationStack.problem(withName: screen) {
                throw APIError.invalidField("push", "\"push\" " + problem + ".")
            }
            return .navigate(.push(screen))
        case (.none, .some(let count)):
            // Any whole number from 1 up; past the stack's limit it is a conflict (cannot_pop),
            // so large counts are clamped rather than refused as malformed.
            let clamped = count.isFinite ? min(count, 1_000_000) : 0
            guard clamped >= 1, Double(Int(clamped)) == clamped else {
                throw APIError.invalidField("pop", "\"pop\" must be a whole number of screens, at least 1.")
            }
            return .navigate(.pop(Int(clamped)))
        }
    }
}
