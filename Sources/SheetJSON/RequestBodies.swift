import SheetCore

/// A request body that must be a JSON object, with the checks every route shares: valid JSON,
/// an object, no field the route does not know, each field of the right type.
///
/// A flat body (`FlatObjectReader`) stays as the reader's spans over the body, and only the
/// values a decoder takes become Strings; any other is jansson's tree.
package struct BodyObject {
    /// jansson's tree, when the flat reader declined the body.
    private let tree: [(key: String, value: JSONValue)]
    /// The body and the flat reader's members in it, when it read the body (stored properties,
    /// not an enum's payload, so a lookup reads them in place instead of copying them out).
    private let body: [UInt8]
    private var flat = FlatObject()
    private let isFlat: Bool

    private init(tree: [(key: String, value: JSONValue)]) {
        self.tree = tree
        body = []
        isFlat = false
    }

    private init(flatBody body: [UInt8]) {
        tree = []
        self.body = body
        isFlat = true
    }

    /// The members in document order.
    package var members: [(key: String, value: JSONValue)] {
        guard isFlat else { return tree }
        return body.withUnsafeBufferPointer { body in
            (0..<flat.count).map { index in
                (FlatObjectReader.key(flat.members[index], in: body), FlatObjectReader.value(flat.members[index], in: body))
            }
        }
    }

    /// An empty (or all-whitespace) body is an empty object: "all defaults".
    package static func parse(_ body: [UInt8]) throws(APIError) -> BodyObject {
        var object = BodyObject(flatBody: body)
        if body.withUnsafeBufferPointer({ FlatObjectReader.read($0, into: &object.flat) }) { return object }
        return try parseWithJansson(body)
    }

    /// `parse` without the flat reader: what every body was before it.
    package static func parseWithJansson(_ body: [UInt8]) throws(APIError) -> BodyObject {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            return BodyObject(tree: [])
        }
        let value: JSONValue
        do { value = try JSONParser.parseWithJansson(body) } catch {
            throw APIError(.invalidJSON, "The body is not valid JSON: \(error.message).")
        }
        guard case .object(let members) = value else {
            throw APIError(.invalidJSON, "The body must be a JSON object, not \(value.kindName).")
        }
        return BodyObject(tree: members)
    }

    /// `known` is an array, not a set: a handful of names, checked on every request, where
    /// building a set would hash each one first.
    package func rejectUnknown(_ known: [String]) throws(APIError) {
        try rejectUnknown(known: known)
    }

    /// The member, or nil when absent. `null` is a value like any other (and a wrong type for
    /// every field but `thresholdDetent` and `largestUndimmedDetent`, where it means "none").
    subscript(key: String) -> JSONValue? { value(key) }

    package func string(_ key: String) throws(APIError) -> String? { try stringValue(key) }
    package func number(_ key: String) throws(APIError) -> Double? { try numberValue(key) }
    package func detent(_ key: String) throws(APIError) -> Detent? { try detentValue(key) }
    /// A detent, or nil when absent or `null` ("none").
    package func nullableDetent(_ key: String) throws(APIError) -> Detent? { try nullableDetentValue(key) }

    package func choice<T: RawRepresentable & CaseIterable>(_ key: String, as type: T.Type) throws(APIError) -> T? where T.RawValue == String {
        try choiceValue(key, as: type)
    }

    // The same, for the decoders below, which name their fields with literals: a flat member's
    // key is compared with the literal's bytes (a String's are dearer to reach than the rest).

    func rejectUnknown(fields known: [StaticString]) throws(APIError) { try rejectUnknown(known: known) }
    subscript(field key: StaticString) -> JSONValue? { value(key) }
    func string(field key: StaticString) throws(APIError) -> String? { try stringValue(key) }
    func number(field key: StaticString) throws(APIError) -> Double? { try numberValue(key) }
    func detent(field key: StaticString) throws(APIError) -> Detent? { try detentValue(key) }
    func nullableDetent(field key: StaticString) throws(APIError) -> Detent? { try nullableDetentValue(key) }
    func choice<T: RawRepresentable & CaseIterable>(field key: StaticString, as type: T.Type) throws(APIError) -> T? where T.RawValue == String {
        try choiceValue(key, as: type)
    }

    /// Which of `literals` the member `key` is, its bytes compared with theirs: nil when it is
    /// none of them, absent, not a string, or the body is jansson's tree.
    func literal(field key: StaticString, among literals: [StaticString]) -> Int? {
        guard isFlat, let index = flatIndex(key) else { return nil }
        let member = flat.members[index]
        guard member.kind == .string else { return nil }
        return body.withUnsafeBufferPointer { body in
            let start = Int(member.valueStart)
            let count = Int(member.valueCount)
            for (position, literal) in literals.enumerated() where literal.utf8CodeUnitCount == count {
                var same = true
                for offset in 0..<count where body[start + offset] != literal.utf8Start[offset] {
                    same = false
                    break
                }
                if same { return position }
            }
            return nil
        }
    }

    // MARK: Lookups, for either kind of name

    private func rejectUnknown<Name: FieldName>(known: [Name]) throws(APIError) {
        guard isFlat else {
            for member in tree where !known.contains(where: { $0.text == member.key }) {
                throw Self.unknown(member.key, known: known.map(\.text))
            }
            return
        }
        for index in 0..<flat.count where !known.contains(where: { keyIs(index, $0) }) {
            let key = body.withUnsafeBufferPointer { FlatObjectReader.key(flat.members[index], in: $0) }
            throw Self.unknown(key, known: known.map(\.text))
        }
    }

    private static func unknown(_ key: String, known: [String]) -> APIError {
        let list = known.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
        let hint = known.isEmpty ? "this request takes no fields" : "known fields are \(list)"
        return APIError(.unknownField, "Unknown field \"\(key)\"; \(hint).", field: key)
    }

    /// Whether the key of flat member `index` is `name`.
    @inline(__always)
    private func keyIs<Name: FieldName>(_ index: Int, _ name: Name) -> Bool {
        let member = flat.members[index]
        return name.withBytes { name in
            guard name.count == Int(member.keyCount) else { return false }
            return body.withUnsafeBufferPointer { body in
                let start = Int(member.keyStart)
                for offset in 0..<name.count where body[start + offset] != name[offset] { return false }
                return true
            }
        }
    }

    /// The flat member named `name`, if there is one.
    @inline(__always)
    private func flatIndex<Name: FieldName>(_ name: Name) -> Int? {
        for index in 0..<flat.count where keyIs(index, name) { return index }
        return nil
    }

    private func value<Name: FieldName>(_ name: Name) -> JSONValue? {
        guard isFlat else {
            let key = name.text
            return tree.first(where: { $0.key == key })?.value
        }
        guard let index = flatIndex(name) else { return nil }
        return body.withUnsafeBufferPointer { FlatObjectReader.value(flat.members[index], in: $0) }
    }

    private func stringValue<Name: FieldName>(_ name: Name) throws(APIError) -> String? {
        if isFlat {
            guard let index = flatIndex(name) else { return nil }
            let member = flat.members[index]
            if member.kind == .string {
                return body.withUnsafeBufferPointer { FlatObjectReader.text(member.valueStart, Int(member.valueCount), in: $0) }
            }
        }
        guard let value = value(name) else { return nil }
        guard case .string(let text) = value else {
            let key = name.text
            throw APIError.invalidField(key, "\"\(key)\" must be a string, not \(value.kindName).")
        }
        return text
    }

    private func numberValue<Name: FieldName>(_ name: Name) throws(APIError) -> Double? {
        if isFlat {
            guard let index = flatIndex(name) else { return nil }
            let member = flat.members[index]
            if member.kind == .number { return body.withUnsafeBufferPointer { FlatObjectReader.number(member, in: $0) } }
        }
        guard let value = value(name) else { return nil }
        guard case .number(let number) = value else {
            let key = name.text
            throw APIError.invalidField(key, "\"\(key)\" must be a number, not \(value.kindName).")
        }
        return number
    }

    private func detentValue<Name: FieldName>(_ name: Name) throws(APIError) -> Detent? {
        guard let text = try stringValue(name) else { return nil }
        do { return try Detent(parsing: text) } catch {
            let key = name.text
            throw APIError(.invalidDetent, "\"\(key)\": \(error.message)", field: key)
        }
    }

    private func nullableDetentValue<Name: FieldName>(_ name: Name) throws(APIError) -> Detent? {
        if case .null? = value(name) { return nil }
        return try detentValue(name)
    }

    private func choiceValue<Name: FieldName, T: RawRepresentable & CaseIterable>(_ name: Name, as type: T.Type) throws(APIError) -> T?
    where T.RawValue == String {
        guard let text = try stringValue(name) else { return nil }
        guard let value = T(rawValue: text) else {
            let key = name.text
            let options = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw APIError.invalidField(key, "\"\(key)\" must be one of \(options), not \"\(text)\".")
        }
        return value
    }
}

/// A field's name as a decoder gives it: a String, or a literal whose bytes are at hand.
private protocol FieldName {
    var text: String { get }
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R
}

extension String: FieldName {
    var text: String { self }
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var text = self
        return text.withUTF8(body)
    }
}

extension StaticString: FieldName {
    var text: String { description }
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        body(UnsafeBufferPointer(start: utf8Start, count: utf8CodeUnitCount))
    }
}

/// The bodies of each route, decoded into SheetCore values: from the body, or (`object:`) from
/// the body already parsed, which tests give parsed both ways.
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
        try decodeCreation(object: BodyObject.parse(body))
    }

    package static func decodeCreation(object: BodyObject) throws(APIError) -> (configuration: SheetConfiguration, parent: SessionID?) {
        try object.rejectUnknown(fields: [
            "detents", "defaultDetent", "thresholdDetent", "dismissPolicy", "interceptAction",
            "containerHeight", "decelerationRate", "protectWhen", "largestUndimmedDetent", "rootScreen", "parent",
        ])
        var parent: SessionID?
        if let value = object[field: "parent"], value != .null {
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
        if let value = object[field: "detents"] {
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
        let defaultDetent = try object.detent(field: "defaultDetent")
        let thresholdDetent = try object.nullableDetent(field: "thresholdDetent")
        let dismissPolicy = try object.choice(field: "dismissPolicy", as: DismissPolicy.self)
        let interceptAction = try object.choice(field: "interceptAction", as: InterceptAction.self)
        let containerHeight = try object.number(field: "containerHeight")
        let decelerationRate = try object.choice(field: "decelerationRate", as: DecelerationRate.self)
        let protectWhen = try object.choice(field: "protectWhen", as: ProtectWhen.self)
        let undimmed = try object.nullableDetent(field: "largestUndimmedDetent")
        let rootScreen = try object.string(field: "rootScreen")
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
        try drag(object: BodyObject.parse(body))
    }

    package static func drag(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: ["to", "translation", "velocity"])
        // The usual targets are recognised in the body's bytes, without a String to parse.
        let usual = object.literal(field: "to", among: ["closed", "large", "medium"]).map { [DragTarget.closed, .detent(.large), .detent(.medium)][$0] }
        let to = usual == nil ? try object.string(field: "to") : nil
        let translation = try object.number(field: "translation")
        let velocity = try object.number(field: "velocity")
        switch (usual != nil || to != nil, translation) {
        case (true, .some):
            throw APIError.invalidField("to", "Give either \"to\" or \"translation\" (with \"velocity\"), not both.")
        case (false, .none):
            let field = velocity == nil ? "to" : "translation"
            throw APIError.invalidField(field, "A drag needs \"to\" (a detent or \"closed\") or \"translation\" (points, with an optional \"velocity\").")
        case (true, .none):
            if velocity != nil {
                throw APIError.invalidField("velocity", "\"velocity\" goes with \"translation\", not with \"to\".")
            }
            if let usual { return .drag(usual) }
            do { return .drag(try DragTarget(parsing: to ?? "")) } catch {
                throw APIError(.invalidDetent, "\"to\": \(error.message)", field: "to")
            }
        case (false, .some(let translation)):
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
        try confirm(object: BodyObject.parse(body))
    }

    package static func confirm(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: ["action"])
        guard let action = try object.choice(field: "action", as: ConfirmAction.self) else {
            throw APIError.invalidField("action", "\"action\" is required: \"discard\", \"save\" or \"cancel\".")
        }
        return .confirm(action)
    }

    package static func dismiss(_ body: [UInt8]) throws(APIError) -> SheetAction {
        try dismiss(object: BodyObject.parse(body))
    }

    package static func dismiss(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: ["reason"])
        return .dismiss(try object.choice(field: "reason", as: AppDismissReason.self) ?? .programmatic)
    }

    package static func present(_ body: [UInt8]) throws(APIError) -> SheetAction {
        try present(object: BodyObject.parse(body))
    }

    package static func present(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: [])
        return .present
    }

    /// `{"hasChanges": true|false}`.
    package static func changes(_ body: [UInt8]) throws(APIError) -> SheetAction {
        try changes(object: BodyObject.parse(body))
    }

    package static func changes(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: ["hasChanges"])
        guard let value = object[field: "hasChanges"] else {
            throw APIError.invalidField("hasChanges", "\"hasChanges\" is required: true or false.")
        }
        guard case .bool(let hasChanges) = value else {
            throw APIError.invalidField("hasChanges", "\"hasChanges\" must be true or false, not \(value.kindName).")
        }
        return .changes(hasChanges: hasChanges)
    }

    /// `{"detent": D}`: a detent of the session, not its threshold (the sheet checks both).
    package static func select(_ body: [UInt8]) throws(APIError) -> SheetAction {
        try select(object: BodyObject.parse(body))
    }

    package static func select(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: ["detent"])
        guard let detent = try object.detent(field: "detent") else {
            throw APIError.invalidField("detent", "\"detent\" is required: one of the session's detents.")
        }
        return .select(detent)
    }

    /// `{"containerHeight": H}`, 1 to 10000 points.
    package static func resize(_ body: [UInt8]) throws(APIError) -> SheetAction {
        try resize(object: BodyObject.parse(body))
    }

    package static func resize(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: ["containerHeight"])
        guard let height = try object.number(field: "containerHeight") else {
            throw APIError.invalidField("containerHeight", "\"containerHeight\" is required: points, 1 to 10000.")
        }
        guard height.isFinite, SheetConfiguration.containerHeightRange.contains(height) else {
            throw APIError.invalidField("containerHeight", "\"containerHeight\" must be a number of points from 1 to 10000.")
        }
        return .resize(containerHeight: height)
    }

    /// Exactly one of `{"push": "<screen>"}` and `{"pop": N}` (a whole number, at least 1).
    package static func navigate(_ body: [UInt8]) throws(APIError) -> SheetAction {
        try navigate(object: BodyObject.parse(body))
    }

    package static func navigate(object: BodyObject) throws(APIError) -> SheetAction {
        try object.rejectUnknown(fields: ["push", "pop"])
        let push = try object.string(field: "push")
        let pop = try object.number(field: "pop")
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
