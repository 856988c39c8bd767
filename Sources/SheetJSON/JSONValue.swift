import CJansson

/// A parsed request body. Bodies are small (64 KiB at most), so a plain tree is cheap and lets
/// the decoders below stay ordinary Swift.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// What kind of value this is, in the words an error message uses.
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// Why a body is not JSON, with jansson's own description of where.
public struct JSONSyntaxError: Error, Sendable, Equatable {
    public let message: String
}

public enum JSONParser {
    /// Deeper bodies are refused before jansson sees them: no request of ours nests past 3, and
    /// this keeps the recursive parse and the tree walk far from any stack limit.
    public static let maximumDepth = 32

    /// Parses one JSON text: strict RFC 8259, UTF-8 validated, duplicate keys refused. A small
    /// flat object is read by `FlatObjectReader`; the rest, and every error, by jansson.
    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        if let members = bytes.withUnsafeBufferPointer(FlatObjectReader.members) { return .object(members) }
        return try parseWithJansson(bytes)
    }

    /// What `FlatObjectReader` makes of `bytes`: the object, or nil where it declines.
    package static func parseFlatObject(_ bytes: [UInt8]) -> JSONValue? {
        bytes.withUnsafeBufferPointer(FlatObjectReader.members).map(JSONValue.object)
    }

    /// Parses one JSON text with jansson alone.
    package static func parseWithJansson(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        try checkDepth(bytes)
        var error = json_error_t()
        // INT_AS_REAL: a huge integer becomes an out-of-range number (a field error), not a parse error.
        let flags = JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL
        let root: UnsafeMutablePointer<json_t>? = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                json_loadb(chars.baseAddress, chars.count, Int(flags), &error)
            }
        }
        guard let root else {
            let text = withUnsafeBytes(of: error.text) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            throw JSONSyntaxError(message: "\(text) (line \(error.line), column \(error.column))")
        }
        defer { json_decref(root) }
        return convert(root)
    }

    private static func checkDepth(_ bytes: [UInt8]) throws(JSONSyntaxError) {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > maximumDepth { throw JSONSyntaxError(message: "nesting deeper than \(maximumDepth) levels") }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
    }

    private static func convert(_ node: UnsafeMutablePointer<json_t>) -> JSONValue {
        switch node.pointee.type {
        case JSON_NULL: return .null
        case JSON_TRUE: return .bool(true)
        case JSON_FALSE: return .bool(false)
        case JSON_INTEGER: return .number(Double(json_integer_value(node)))
        case JSON_REAL: return .number(json_real_value(node))
        case JSON_STRING:
            let length = json_string_length(node)
            guard let start = json_string_value(node) else { return .string("") }
            let text = start.withMemoryRebound(to: UInt8.self, capacity: length) { pointer in
                String(decoding: UnsafeBufferPointer(start: pointer, count: length), as: UTF8.self)
            }
            return .string(text)
        case JSON_ARRAY:
            var items: [JSONValue] = []
            let count = json_array_size(node)
            items.reserveCapacity(count)
            for index in 0..<count {
                if let item = json_array_get(node, index) { items.append(convert(item)) }
            }
            return .array(items)
        case JSON_OBJECT:
            // Keys in document order, so "the first unknown field" means what the client wrote first.
            var members: [(key: String, value: JSONValue)] = []
            var iterator = json_object_iter(node)
            while let current = iterator {
                let keyLength = json_object_iter_key_len(current)
                let key: String
                if let keyStart = json_object_iter_key(current) {
                    key = keyStart.withMemoryRebound(to: UInt8.self, capacity: keyLength) { pointer in
                        String(decoding: UnsafeBufferPointer(start: pointer, count: keyLength), as: UTF8.self)
                    }
                } else {
                    key = ""
                }
                if let value = json_object_iter_value(current) { members.append((key, convert(value))) }
                iterator = json_object_iter_next(node, current)
            }
            return .object(members)
        default:
            return .null
        }
    }
}
