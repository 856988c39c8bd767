import SheetCore
import SheetObservability
import Testing

/// The counters behind `/metrics`: each label combination counts only its own requests and
/// events, and adds from many threads at once are all counted.
@Suite struct MetricsCounting {
    @Test("a counter counts its own adds and no other's", arguments: [1, 2, 7, 64])
    func ownAdds(count: Int) {
        let cells = CounterCells(count: count)
        for index in 0..<count {
            for _ in 0...index { cells.add(at: index) }
        }
        cells.add(at: count - 1, 1_000)
        for index in 0..<count - 1 { #expect(cells[index] == UInt64(index + 1)) }
        #expect(cells[count - 1] == UInt64(count + 1_000))
    }

    @Test("adds from eight tasks at once are all counted")
    func concurrentAdds() async {
        let cells = CounterCells(count: 3)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for round in 0..<10_000 { cells.add(at: round % 3) }
                }
            }
        }
        #expect((0..<3).map { cells[$0] } == [26_672, 26_664, 26_664])
    }

    @Test("a request is counted under its route, method and status, and its time in its bucket", arguments: [
        (0, "POST", 200, 0.00004, 0),
        (1, "GET", 404, 0.0003, 3),
        (nil, "PATCH", 299, 40.0, 14),
    ] as [(Int?, String, Int, Double, Int)])
    func request(route: Int?, method: String, status: Int, seconds: Double, bucket: Int) {
        let metrics = Metrics(routes: ["/a", "/b"], methods: ["GET", "POST"])
        metrics.recordRequest(route: route, method: method, status: status, seconds: seconds)
        let routeIndex = route ?? 2
        let methodIndex = metrics.methods.firstIndex(of: method) ?? metrics.methods.count - 1
        let statusIndex = Metrics.statuses.firstIndex(of: status) ?? Metrics.statuses.count - 1
        let cell = (routeIndex * metrics.methods.count + methodIndex) * Metrics.statuses.count + statusIndex
        for index in 0..<metrics.requests.count { #expect(metrics.requests[index] == (index == cell ? 1 : 0)) }
        let bucketCell = routeIndex * (Metrics.buckets.count + 1) + bucket
        for index in 0..<metrics.durationBuckets.count { #expect(metrics.durationBuckets[index] == (index == bucketCell ? 1 : 0)) }
        #expect(metrics.durationCount[routeIndex] == 1)
        #expect(metrics.durationSumMicros[routeIndex] == UInt64(seconds * 1_000_000))
    }
}
