import Testing
@testable import AccessControl

@Suite struct SHA256Tests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        (String(repeating: "a", count: 1000), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"),
    ])
    func knownVectors(message: String, hex: String) {
        #expect(Hex.encode(SHA256.digest(Array(message.utf8))) == hex)
    }
}

@Suite struct HexTests {
    @Test(arguments: [("0aFf", [0x0a, 0xff] as [UInt8]?), ("", []), ("00ff10", [0, 0xff, 0x10]),
                      ("abc", nil), ("zz", nil), ("0g", nil), (" 0a", nil), ("0a ", nil), (":0:a", nil)])
    func decodesEvenHexDigitsOnly(text: String, bytes: [UInt8]?) {
        #expect(Hex.decode(Substring(text)) == bytes)
    }

    @Test func encodesLowerCaseAndReadsItBack() {
        let bytes = (0...255).map(UInt8.init)
        let text = Hex.encode(bytes)
        #expect(text.hasPrefix("000102") && text.hasSuffix("fdfeff") && text.count == 512)
        #expect(Hex.decode(Substring(text)) == bytes)
        #expect(Hex.encode([]) == "")
    }
}

@Suite struct KeyFileTests {
    static let digest = KeyDigest(ofKey: "secret".utf8).hex

    @Test func readsLinesCommentsAndBlanks() throws {
        let text = "# keys\n\nacme app \(Self.digest)   # the app\r\n\tglobex observer \(KeyDigest(ofKey: "other".utf8).hex)\n"
        let entries = try KeyFile.parse(text)
        #expect(entries.map(\.tenant) == ["acme", "globex"])
        #expect(entries.map(\.role) == [.app, .observer])
        #expect(entries.map(\.line) == [3, 4])
    }

    @Test(arguments: [
        ("acme app", 1, "expected"),
        ("acme admin \(digest)", 1, "role"),
        ("ac/me app \(digest)", 1, "tenant"),
        ("acme app sheetd_rawkeyinsteadofdigest", 1, "SHA-256"),
        ("# ok\nacme app \(digest)\nacme observer \(digest)", 3, "already listed on line 2"),
    ])
    func refusesAMistakeNamingItsLine(text: String, line: Int, words: String) {
        #expect {
            try KeyFile.parse(text)
        } throws: { error in
            guard let error = error as? KeyFileError else { return false }
            return error.line == line && error.message.contains(words)
        }
    }
}

@Suite struct KeyRingTests {
    let ring = KeyRing(try! KeyFile.parse("""
        acme app \(KeyDigest(ofKey: "key-one".utf8).hex)
        acme observer \(KeyDigest(ofKey: "key-two".utf8).hex)
        globex operator \(KeyDigest(ofKey: "key-three".utf8).hex)
        """))

    @Test(arguments: [
        ("Bearer key-one", "acme", Role.app),
        ("bearer key-two", "acme", Role.observer),
        ("Bearer   key-three", "globex", Role.operator),
    ])
    func findsTheCallerOfAKey(header: String, tenant: String, role: Role) throws {
        let caller = try ring.caller(authorization: header).get()
        #expect(caller.tenant == tenant)
        #expect(caller.role == role)
    }

    @Test(arguments: [
        (String?.none, KeyRefusal.missingKey),
        ("Basic a2V5LW9uZQ==", .invalidHeader),
        ("Bearer", .invalidHeader),
        ("Bearer key one", .invalidHeader),
        ("Bearer key-on", .unknownKey),
        ("Bearer key-one ", .invalidHeader),
    ])
    func refuses(header: String?, refusal: KeyRefusal) {
        #expect(throws: refusal) { try ring.caller(authorization: header).get() }
    }

    @Test func aReplacedRingForgetsRemovedKeysAtOnce() throws {
        let ring = KeyRing(try KeyFile.parse("acme app \(KeyDigest(ofKey: "a".utf8).hex)\nacme app \(KeyDigest(ofKey: "b".utf8).hex)"))
        ring.replace(with: try KeyFile.parse("acme app \(KeyDigest(ofKey: "b".utf8).hex)"))
        #expect(throws: KeyRefusal.unknownKey) { try ring.caller(authorization: "Bearer a").get() }
        #expect(try ring.caller(authorization: "Bearer b").get().tenant == "acme")
    }

    @Test func aNewKeyIsAcceptedByItsOwnLine() throws {
        let key = NewKey(tenant: "acme", role: .observer)
        #expect(key.key.hasPrefix("sheetd_") && key.key.utf8.count == 7 + 43)
        let ring = KeyRing(try KeyFile.parse(key.line))
        #expect(try ring.caller(authorization: "Bearer " + key.key).get() == ring.caller(authorization: "Bearer " + key.key).get())
        #expect(try ring.caller(authorization: "Bearer " + key.key).get().role == .observer)
        #expect(NewKey(tenant: "acme", role: .app).key != key.key)
    }
}

@Suite struct RateLimiterTests {
    final class FakeClock: @unchecked Sendable {
        // @unchecked Sendable: the tests change and read it from one task only.
        var nanoseconds: Int64 = 1_000_000_000
    }

    @Test func aBurstOfNThenOnePerIntervalAndOtherBucketsUntouched() {
        let clock = FakeClock()
        let limiter = RateLimiter(requestsPerSecond: 5, now: { clock.nanoseconds })
        for _ in 0..<5 { #expect(limiter.take(.key(1)) == .allowed) }
        #expect(limiter.take(.key(1)) == .limited(retryAfter: 1))
        for _ in 0..<5 { #expect(limiter.take(.key(2)) == .allowed) }
        clock.nanoseconds += 200_000_000
        #expect(limiter.take(.key(1)) == .allowed)
        #expect(limiter.take(.key(1)) == .limited(retryAfter: 1))
        clock.nanoseconds += 10_000_000_000
        for _ in 0..<5 { #expect(limiter.take(.key(1)) == .allowed) }
        #expect(limiter.take(.key(1)) != .allowed)
    }

    @Test func retryAfterCountsWholeSecondsUntilAToken() {
        let clock = FakeClock()
        let limiter = RateLimiter(requestsPerSecond: 1, now: { clock.nanoseconds })
        #expect(limiter.take(.address("10.0.0.1")) == .allowed)
        #expect(limiter.take(.address("10.0.0.1")) == .limited(retryAfter: 1))
        #expect(limiter.take(.address("10.0.0.2")) == .allowed)
    }

    @Test func manyAddressesCannotGrowTheTableWithoutBound() {
        let clock = FakeClock()
        let limiter = RateLimiter(requestsPerSecond: 1, maximumBuckets: 64, now: { clock.nanoseconds })
        for index in 0..<10_000 { _ = limiter.take(.address("10.0.\(index / 256).\(index % 256)")) }
        #expect(limiter.bucketCount <= 64)
    }
}
