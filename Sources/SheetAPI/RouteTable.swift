import AccessControl
import SheetCore
import SheetJSON
import SheetObservability

/// Every route sheetd serves, each declared once: its path template (also its label in metrics
/// and logs), its methods, and what answers each. Routing, 405's `Allow`, the metric label set
/// and the fuzzers' body decoders all read this table. Each method names the access a caller's
/// role must allow (`RequiredAccess`); an action always changes its session.
///
/// A new action is one `.action` entry here with its body decoder (`RequestBodies`); a new
/// route of another kind is one `.handlers` entry and its handler, a `SheetService` method.
package enum RouteTable {
    package static let entries: [RouteEntry] = [
        // Actions first: a drag, the commonest request, matches on the first template tried.
        .action("/sessions/{id}/drag", decode: RequestBodies.drag),
        .action("/sessions/{id}/confirm", decode: RequestBodies.confirm),
        .action("/sessions/{id}/dismiss", decode: RequestBodies.dismiss),
        .action("/sessions/{id}/present", decode: RequestBodies.present),
        .action("/sessions/{id}/changes", decode: RequestBodies.changes),
        .action("/sessions/{id}/select", decode: RequestBodies.select),
        .action("/sessions/{id}/resize", decode: RequestBodies.resize),
        .action("/sessions/{id}/navigate", decode: RequestBodies.navigate),
        .handlers("/sessions", .get(.readSessions, SheetService.listSessions), .post(.changeSessions, SheetService.createSession, inPlace: SheetService.createSessionInPlace)),
        .handlers("/sessions/{id}",
                  .get(.readSessions, SheetService.getSession, inPlace: SheetService.getSessionInPlace),
                  .delete(.changeSessions, SheetService.deleteSession)),
        .handlers("/sessions/{id}/events", .get(.readSessions, SheetService.events)),
        .handlers("/healthz", .get(.open, SheetService.health)),
        .handlers("/metrics", .get(.readMetrics, SheetService.metrics)),
        .handlers("/openapi.yaml", .get(.open, SheetService.openAPI)),
        .handlers("/", WebPage.index.handler),
        .handlers("/playground", WebPage.playground.handler),
        .handlers("/playground.js", WebPage.playgroundScript.handler),
        .handlers("/playground.css", WebPage.playgroundStyle.handler),
    ]

    /// `entries` without their reference counts, for what every request reads of them
    /// (`withEntry`): the table keeps its entries for the life of the process, and a retain of an
    /// entry that every request thread reads moves its cache line between cores.
    private static let borrowed: [Unmanaged<RouteEntry>] = entries.map { Unmanaged.passUnretained($0) }

    /// Calls `body` with entry `index`, borrowed: no reference count changes.
    static func withEntry<Result>(at index: Int, _ body: (RouteEntry) throws -> Result) rethrows -> Result {
        try borrowed[index]._withUnsafeGuaranteedRef(body)
    }

    /// Each action route's body decoder, for the fuzzers.
    package static var actionDecoders: [@Sendable ([UInt8]) throws(APIError) -> SheetAction] {
        entries.compactMap { entry in
            guard case .action(let decode) = entry.answer else { return nil }
            return decode
        }
    }

    /// Every method some route answers, in the order the table first names them.
    package static var methods: [String] {
        var methods: [String] = []
        for entry in entries {
            for method in entry.allowedMethods where !methods.contains(method) { methods.append(method) }
        }
        return methods
    }
}
