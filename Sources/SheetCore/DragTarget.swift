/// Where a drag ends: a detent, or "closed" (a swipe past the smallest detent).
///
/// `closed` is not a detent — it has no height to rest at — so it lives beside them here rather
/// than as a fifth detent kind that every configuration rule would have to exclude.
public enum DragTarget: Hashable, Sendable, Codable, CustomStringConvertible {
    case detent(Detent)
    case closed

    /// `closed`, or any detent string `Detent(parsing:)` reads.
    public init(parsing string: String) throws(DetentError) {
        if string == "closed" {
            self = .closed
            return
        }
        do {
            self = .detent(try Detent(parsing: string))
        } catch where error.code == .unknownKind {
            throw DetentError(code: .unknownKind, input: string,
                              message: "\(Detent.quoted(string)) is not a drag target: expected closed, large, medium, fraction:F or height:H")
        }
    }

    /// "closed" or the detent's canonical string.
    public var description: String {
        switch self {
        case .closed: "closed"
        case .detent(let d): d.description
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try DragTarget(parsing: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
