/// The rules of a sheet's navigation stack: screen names, and how deep it may grow.
///
/// A pop inside a sheet is navigation, not dismissal ("do not confuse dismissal with
/// navigation popping"), so the stack is kept apart from the phase.
public enum NavigationStack {
    public static let defaultRoot = "root"
    /// Screens a stack holds at most, the root included.
    public static let maximumDepth = 32
    public static let maximumNameLength = 64

    /// Why `name` is not a screen name, or nil when it is one: 1 to 64 characters of
    /// `A–Z a–z 0–9 . _ -`. The sentence completes "<field> …".
    public static func problem(withName name: String) -> String? {
        let utf8 = name.utf8
        guard !utf8.isEmpty, utf8.count <= maximumNameLength else {
            return "must be 1 to \(maximumNameLength) characters long, got \(utf8.count)"
        }
        for byte in utf8 where !isNameByte(byte) {
            return "may hold only letters, digits, \".\", \"_\" and \"-\", not \(Detent.quoted(name))"
        }
        return nil
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }
}
