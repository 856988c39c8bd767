import SheetCore
import Locking

/// What every session of one configuration shows alike, rendered once: the `config` member, and
/// the members of a session whose later state is still a new sheet's (no changes, the
/// configured container height, only the root screen, no chain), from `hasChanges` through
/// `thresholdActive`. Heights and the threshold's state follow from the configuration and the
/// container height alone, so these bytes are what rendering such a session writes.
final class ConfigurationRendering: Sendable {
    let configuration: SheetConfiguration
    /// The `config` member's value.
    let config: [UInt8]
    /// `,"hasChanges":false,` … `"thresholdActive":false`: the members as a new sheet of the
    /// configuration shows them.
    let startState: [UInt8]

    init(_ configuration: SheetConfiguration) {
        self.configuration = configuration
        var writer = JSONWriter(capacity: 512)
        Rendering.renderConfiguration(configuration, into: &writer)
        config = writer.bytes
        let sheet = Sheet(configuration: configuration, now: Timestamp(millisecondsSince1970: 0))
        var state = JSONWriter(capacity: 256)
        state.null()   // a value before them, as in a session, so the first member is separated
        let start = state.byteCount
        Rendering.stateMembers(LaterState(of: sheet), of: sheet, into: &state)
        startState = state.bytes(from: start)
    }
}

/// The renderings of recent configurations: sessions share a few configurations (every session
/// of an app's sheet has the same one), and what they show alike is half a session's answer.
///
/// Bounded whatever the sessions hold (`RecentSlots`). A rendering is found by a fingerprint of
/// two members first, then by `SheetConfiguration`'s `==` (the same storage, else equal members),
/// and made the second time its configuration misses lately.
enum ConfigurationRenderings {
    /// Each thread keeps its own: every drag and read looks here, and a lock shared by the
    /// request threads (with the reference counts of the renderings it hands out) moved its cache
    /// lines between cores on every one. A thread makes a rendering of its own the second time a
    /// configuration misses there.
    private static let slots = PerThread { RecentSlots<ConfigurationRendering>(capacity: 32, seenCount: 32) }

    /// The rendering of `configuration`, or nil when it is not worth making (yet).
    static func rendering(of configuration: SheetConfiguration) -> ConfigurationRendering? {
        let fingerprint = fingerprint(configuration)
        let (found, missedLately) = slots.withValue { slots -> (ConfigurationRendering?, Bool) in
            if let index = slots.index(of: fingerprint, where: { $0.configuration == configuration }) {
                return (slots[index], false)
            }
            return (nil, slots.missedLately(fingerprint))
        }
        if let found { return found }
        guard missedLately else { return nil }
        let made = ConfigurationRendering(configuration)   // rendered outside the access to the slots
        slots.withValue { _ = $0.insert(made, fingerprint: fingerprint) }
        return made
    }

    /// Tells most distinct configurations apart without comparing them whole: the container
    /// height and the default detent, read without copying the detents.
    static func fingerprint(_ configuration: SheetConfiguration) -> UInt64 {
        let detentBits: UInt64
        switch configuration.defaultDetent {
        case .large: detentBits = 1
        case .medium: detentBits = 2
        case .fraction(let fraction): detentBits = fraction.bitPattern ^ 3
        case .height(let height): detentBits = height.bitPattern ^ 4
        }
        return configuration.containerHeight.bitPattern ^ (detentBits &* 0x9E37_79B9_7F4A_7C15)
    }
}
