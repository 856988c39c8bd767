/// Milliseconds since 1970-01-01T00:00:00Z, UTC. The caller supplies "now".
///
/// The core never reads a clock itself, so the reducer stays deterministic and tests can use a
/// fixed time. Formatting is done by hand because SheetCore does not import Foundation.
public struct Timestamp: Hashable, Comparable, Sendable, Codable {
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// 0000-01-01T00:00:00.000Z: the earliest instant `rfc3339` can print with four year digits.
    public static let earliestFormattable = Timestamp(millisecondsSince1970: -62_167_219_200_000)
    /// 9999-12-31T23:59:59.999Z: the latest instant `rfc3339` can print with four year digits.
    public static let latestFormattable = Timestamp(millisecondsSince1970: 253_402_300_799_999)

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// RFC 3339, UTC, exactly three fraction digits: "2026-11-29T13:28:51.123Z".
    ///
    /// Instants outside years 0000–9999 are clamped to that range, so the output always has the
    /// fixed 24-character shape `init?(rfc3339:)` reads back.
    public var rfc3339: String {
        String(unsafeUninitializedCapacity: Self.rfc3339Length) { buffer in
            writeRFC3339(into: buffer)
            return Self.rfc3339Length
        }
    }

    /// The length of every `rfc3339` text.
    public static let rfc3339Length = 24

    /// Writes the bytes of `rfc3339` into the first `rfc3339Length` bytes of `out`: answers put
    /// timestamps straight into their buffer instead of making a String for each.
    public func writeRFC3339(into out: UnsafeMutableBufferPointer<UInt8>) {
        precondition(out.count >= Self.rfc3339Length, "an RFC 3339 timestamp needs 24 bytes")
        let (day, millisecond) = rfc3339Parts
        Self.writeRFC3339Date(day: day, into: out.baseAddress!)
        Self.writeRFC3339Time(millisecond: millisecond, into: out.baseAddress! + Self.rfc3339DateLength)
    }

    /// The length of the date part of `rfc3339`, its `T` included: "2026-11-29T".
    public static let rfc3339DateLength = 11

    /// What `rfc3339` shows: the day (since 1970-01-01) of its date and the millisecond of that
    /// day of its time, after clamping to the formattable range. A writer of several timestamps
    /// of one day (an answer's) formats the date once.
    public var rfc3339Parts: (day: Int64, millisecond: Int) {
        let ms = min(max(millisecondsSince1970, Self.earliestFormattable.millisecondsSince1970),
                     Self.latestFormattable.millisecondsSince1970)
        let (days, msOfDay) = floorDivide(ms, 86_400_000)
        return (days, Int(msOfDay))
    }

    /// Writes the first `rfc3339DateLength` bytes of `rfc3339` for a `day` of `rfc3339Parts`.
    public static func writeRFC3339Date(day: Int64, into out: UnsafeMutablePointer<UInt8>) {
        let (year, month, dayOfMonth) = civil(fromDays: day)
        put2(Int(year) / 100, at: out)
        put2(Int(year) % 100, at: out + 2)
        out[4] = UInt8(ascii: "-")
        put2(month, at: out + 5)
        out[7] = UInt8(ascii: "-")
        put2(dayOfMonth, at: out + 8)
        out[10] = UInt8(ascii: "T")
    }

    /// Writes the last `rfc3339Length - rfc3339DateLength` bytes of `rfc3339` ("13:28:51.123Z")
    /// for a `millisecond` of `rfc3339Parts`.
    public static func writeRFC3339Time(millisecond: Int, into out: UnsafeMutablePointer<UInt8>) {
        let seconds = millisecond / 1000
        let millis = millisecond % 1000
        put2(seconds / 3600, at: out)
        out[2] = UInt8(ascii: ":")
        put2(seconds / 60 % 60, at: out + 3)
        out[5] = UInt8(ascii: ":")
        put2(seconds % 60, at: out + 6)
        out[8] = UInt8(ascii: ".")
        out[9] = UInt8(truncatingIfNeeded: 48 + millis / 100)
        put2(millis % 100, at: out + 10)
        out[12] = UInt8(ascii: "Z")
    }

    /// The two digits of `value` (0 to 99), from a table of all hundred pairs.
    @inline(__always)
    private static func put2(_ value: Int, at out: UnsafeMutablePointer<UInt8>) {
        let pairs: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
        UnsafeMutableRawPointer(out).copyMemory(from: pairs.utf8Start + 2 * value, byteCount: 2)
    }

    /// Parses exactly the form `rfc3339` prints, so stored sessions read back bit for bit.
    /// Anything else (offsets, other precisions, leap seconds, impossible dates) is nil.
    public init?(rfc3339 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 24,
              bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
              bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
              bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "."),
              bytes[23] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ offset: Int, _ digits: Int) -> Int? {
            var value = 0
            for i in offset..<(offset + digits) {
                let b = bytes[i]
                guard b >= 48, b <= 57 else { return nil }
                value = value * 10 + Int(b - 48)
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
              let millis = number(20, 3),
              (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
              hour < 24, minute < 60, second < 60
        else { return nil }
        let days = daysFromCivil(year: Int64(year), month: Int64(month), day: Int64(day))
        let ms = ((days * 24 + Int64(hour)) * 60 + Int64(minute)) * 60 + Int64(second)
        millisecondsSince1970 = ms * 1000 + Int64(millis)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Timestamp(rfc3339: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected an RFC 3339 UTC time with milliseconds, got \"\(text)\"")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rfc3339)
    }
}

// Calendar arithmetic after Howard Hinnant's "chrono-Compatible Low-Level Date Algorithms":
// exact for the proleptic Gregorian calendar with no tables and no Foundation.

private func floorDivide(_ a: Int64, _ b: Int64) -> (quotient: Int64, remainder: Int64) {
    let q = a / b
    let r = a % b
    return r < 0 ? (q - 1, r + b) : (q, r)
}

private func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}

private func civil(fromDays days: Int64) -> (year: Int64, month: Int, day: Int) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = Int(doy - (153 * mp + 2) / 5 + 1)
    let month = Int(mp < 10 ? mp + 3 : mp - 9)
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

private func daysInMonth(year: Int, month: Int) -> Int {
    switch month {
    case 2:
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        return leap ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
}
