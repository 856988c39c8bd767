import Foundation

/// `value` as JSON text with sorted keys, for comparing what two parses produced: Foundation's
/// bridged booleans from two parses do not always compare equal as objects (a `true` against a
/// `true`, as NSDictionary or NSNumber), but their JSON text does.
func canonicalJSON(_ value: Any) -> String {
    (try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys]))
        .map { String(decoding: $0, as: UTF8.self) } ?? "\(value)"
}
