import SheetCore
import Synchronization

/// The `config` member of recent configurations, rendered once and copied after: sessions share
/// a few configurations (every session of an app's sheet has the same one), and the member is a
/// third of a session's answer.
///
/// Bounded whatever the sessions hold (`RecentSlots`). An entry is compared by a fingerprint of
/// two members first, then by `SheetConfiguration`'s `==` (the same storage, else equal
/// members): a hit copies what a fresh rendering writes, byte for byte.
enum ConfigurationTexts {
    /// What `write` did.
    enum Lookup {
        /// Copied the cached rendering.
        case written
        /// Not cached: render it and `remember` it.
        case renderAndRemember
        /// Not cached, and not missed lately: render it only.
        case render
    }

    private struct Entry {
        let configuration: SheetConfiguration
        let text: [UInt8]
    }

    private static let slots = Mutex(RecentSlots<Entry>(capacity: 32, seenCount: 32))

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

    /// Copies the cached rendering of `configuration` into `writer`, or says what to do instead.
    static func write(_ configuration: SheetConfiguration, fingerprint: UInt64, into writer: inout JSONWriter) -> Lookup {
        slots.withLock { slots in
            guard let index = slots.index(of: fingerprint, where: { $0.configuration == configuration }) else {
                return slots.missedLately(fingerprint) ? .renderAndRemember : .render
            }
            slots[index].text.withUnsafeBufferPointer { writer.raw($0) }
            return .written
        }
    }

    /// Keeps `text`, the rendering of `configuration`.
    static func remember(_ configuration: SheetConfiguration, fingerprint: UInt64, text: [UInt8]) {
        let entry = Entry(configuration: configuration, text: text)
        let replaced: Entry? = slots.withLock { slots in
            // Another thread may have rendered the same one meanwhile.
            if slots.index(of: fingerprint, where: { $0.configuration == configuration }) != nil { return nil }
            return slots.insert(entry, fingerprint: fingerprint)
        }
        _ = replaced   // released here, after the lock
    }
}
