/// A fresh API key for `sheetd keys new`: 256 bits from the kernel's CSPRNG
/// (`SystemRandomNumberGenerator` reads getrandom on Linux), as `sheetd_` and 43 base64url
/// characters, and the keys-file line that accepts it.
public struct NewKey: Sendable {
    public let key: String
    public let line: String

    public init(tenant: String, role: Role) {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        for _ in 0..<4 {
            let word: UInt64 = generator.next()
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        key = "sheetd_" + Self.base64URL(bytes)
        line = "\(tenant) \(role.rawValue) \(KeyDigest(ofKey: key.utf8).hex)"
    }

    private static func base64URL(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var text: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value: UInt32 = 0
            for byte in chunk { value = value << 8 | UInt32(byte) }
            value <<= UInt32(8 * (3 - chunk.count))
            for position in 0...chunk.count {
                text.append(alphabet[Int((value >> UInt32(18 - 6 * position)) & 0x3f)])
            }
            index += 3
        }
        return String(decoding: text, as: UTF8.self)
    }
}
