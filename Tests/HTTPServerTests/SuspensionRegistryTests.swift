@testable import HTTPServer
import Testing

/// The registry of suspended requests, without sockets: requests go in when suspended and come
/// out when they complete, in any order, or through the sweep and shutdown.
@Suite("Suspension registry (no sockets)")
struct SuspensionRegistryTests {
    private static let core = ServerCore(configuration: HTTPServerConfiguration(), responder: NoResponder())

    private struct NoResponder: HTTPResponder {
        func respond(to request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 500) }
    }

    private static func request(_ number: Int) -> RequestContext {
        // Never dereferenced: the registry does not touch the connection.
        let unusedConnection = OpaquePointer(bitPattern: 0x1)!
        return RequestContext(connection: unusedConnection, startedNanoseconds: 0, machine: RequestStateMachine(limits: core.limits),
                              head: HTTPRequestHead(method: .get, path: "/\(number)"))
    }

    enum Order: String, CaseIterable, CustomStringConvertible {
        case asAdded, reversed, middleFirst
        var description: String { rawValue }

        func arrange(_ count: Int) -> [Int] {
            switch self {
            case .asAdded: Array(0..<count)
            case .reversed: Array((0..<count).reversed())
            case .middleFirst: Array(stride(from: 1, to: count, by: 2)) + Array(stride(from: 0, to: count, by: 2))
            }
        }
    }

    @Test("requests completed in any order leave nothing in the registry, and each is taken out once",
          arguments: Order.allCases)
    func completedRequestsLeave(order: Order) {
        let registry = SuspensionRegistry()
        let requests = (0..<7).map(Self.request)
        for request in requests { #expect(registry.add(request)) }
        #expect(registry.requestCount == 7)
        var left = 7
        for index in order.arrange(requests.count) {
            registry.remove(requests[index])
            left -= 1
            #expect(registry.requestCount == left)
            #expect(requests[index].registrySlot == -1)
            // Completing twice (or a request the sweep took) takes nothing else out.
            registry.remove(requests[index])
            #expect(registry.requestCount == left)
        }
    }

    @Test("the sweep takes out the unanswered requests past their deadline, and only those")
    func sweepTakesExpired() {
        let registry = SuspensionRegistry()
        let now = ContinuousClock.now
        let requests = (0..<6).map(Self.request)
        for (index, request) in requests.enumerated() {
            // Even: past the deadline. 4: past it but answered (it stays until it completes).
            request.deadline = index.isMultiple(of: 2) ? now - .seconds(1) : now + .seconds(60)
            #expect(registry.add(request))
        }
        requests[4].cancel()
        let expired = registry.sweep(now: now)
        #expect(expired.map(\.head.path).sorted() == ["/0", "/2"])
        #expect(registry.requestCount == 4)
        #expect(registry.pendingRequestCount == 3)
        for request in expired { #expect(request.registrySlot == -1) }
        // Those left are still where their slots say: each comes out on completion.
        for index in [1, 3, 4, 5] { registry.remove(requests[index]) }
        #expect(registry.requestCount == 0)
    }

    @Test("shutdown hands out the unanswered requests and refuses new ones")
    func closeHandsOutUnanswered() {
        let registry = SuspensionRegistry()
        let requests = (0..<3).map(Self.request)
        for request in requests { #expect(registry.add(request)) }
        requests[1].cancel()
        let (pending, streams) = registry.close()
        #expect(pending.map(\.head.path).sorted() == ["/0", "/2"])
        #expect(streams.isEmpty)
        #expect(registry.requestCount == 0)
        #expect(!registry.add(Self.request(9)))
        registry.remove(requests[0])
        #expect(registry.requestCount == 0)
    }
}
