import HTTPServer
import SheetCore
import Testing
@testable import SheetAPI

/// What a request's entry reads from bytes rather than through String operations: the loopback
/// test of protected mode, the route kept from preflight, and the session id in a path.
@Suite("Request entry")
struct RequestEntryTests {
    @Test("protected mode's loopback test", arguments: [
        ("127.0.0.1", true), ("127.255.3.4", true), ("::1", true),
        ("128.0.0.1", false), ("12.7.0.1", false), ("127", false), ("127x0.0.1", false), ("", false),
        ("::2", false), ("::11", false), ("0:0:0:0:0:0:0:1", false), ("10.0.0.127", false),
    ])
    func loopback(address: String, expected: Bool) {
        #expect(SheetService.isLoopback(address) == expected)
    }

    @Test("the route kept from preflight is the route the path names",
          arguments: ["/sessions", "/sessions/abc", "/sessions/abc/drag", "/sessions/abc/events", "/healthz", "/playground.js"])
    func routeFromTag(path: String) throws {
        let parsed = try #require(Route(path: path))
        let kept = try #require(Route(tag: parsed.index, path: path))
        #expect(kept == parsed)
        #expect(kept.id == parsed.id)
        #expect(kept.template == parsed.template)
    }

    @Test("a tag that does not fit the path falls back to parsing the path")
    func mismatchedTag() throws {
        let drag = try #require(Route(path: "/sessions/abc/drag"))
        let healthz = try #require(Route(path: "/healthz"))
        #expect(Route(tag: drag.index, path: "/healthz") == healthz)
        #expect(Route(tag: -1, path: "/sessions/abc/drag") == drag)
        #expect(Route(tag: RouteTable.entries.count, path: "/sessions/abc/drag") == drag)
        #expect(Route(tag: healthz.index, path: "/nothing") == nil)
    }

    @Test("the session id is read from the path's bytes")
    func sessionIDFromPath() throws {
        let id = SessionID.random()
        let route = try #require(Route(path: "/sessions/\(id)/drag"))
        #expect(route.sessionID == id)
        #expect(try #require(Route(path: "/sessions/AAAAAAAAAAAAAAAAAAAAAB/drag")).sessionID == nil, "another spelling of an id")
        #expect(try #require(Route(path: "/sessions/short/drag")).sessionID == nil)
        #expect(try #require(Route(path: "/sessions/ünïcödé-ïd-of-22-bÿtes/drag")).sessionID == nil)
    }

    @Test("SessionID(utf8:) reads what description writes, and nothing else")
    func sessionIDFromBytes() {
        for _ in 0..<200 {
            let id = SessionID.random()
            let bytes = Array(id.description.utf8)
            #expect(bytes.withUnsafeBufferPointer { SessionID(utf8: $0) } == id)
        }
        for text in ["", "A", "AAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAA.A", "AAAAAAAAAAAAAAAAAAAAAAA"] {
            #expect(Array(text.utf8).withUnsafeBufferPointer { SessionID(utf8: $0) } == nil, "\(text)")
        }
    }

    @Test("an answer's ETag is its version in decimal, quoted, and reads back as that version",
          arguments: [UInt64(0), 1, 9, 10, 1_000_000, UInt64.max])
    func entityTag(version: UInt64) throws {
        var headers = HTTPHeaders()
        headers.addEntityTag(version: version)
        let tag = try #require(headers["ETag"])
        #expect(tag == "\"\(version)\"")
        #expect(try #require(EntityTagCondition(tag)).strongVersions.versions == [version])
    }
}
