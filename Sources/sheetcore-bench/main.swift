// Micro-benchmark of SheetCore's hot path. Run in release mode:
//     swift run -c release sheetcore-bench
// Each case runs `iterations` operations per run, several runs, and reports the median.
import Dispatch
import SheetCore

let iterations = 2_000_000
let runs = 7

func measure(_ name: String, _ body: (Int) -> UInt64) {
    var perOp: [Double] = []
    var sink: UInt64 = 0
    _ = body(iterations / 10)   // warm up
    for _ in 0..<runs {
        let start = DispatchTime.now().uptimeNanoseconds
        sink &+= body(iterations)
        let end = DispatchTime.now().uptimeNanoseconds
        perOp.append(Double(end - start) / Double(iterations))
    }
    perOp.sort()
    let median = perOp[runs / 2]
    func f(_ x: Double) -> String { String(Double(Int(x * 10)) / 10) }
        let label = name + String(repeating: " ", count: max(0, 44 - name.count))
    print("\(label) median \(f(median)) ns/op  (min \(f(perOp[0])), max \(f(perOp[runs - 1])))  [sink \(sink % 10)]")
}

let configuration = try! SheetConfiguration(detents: [.large, .medium], thresholdDetent: .height(300))
let now = Timestamp(millisecondsSince1970: 1_764_422_931_123)

measure("apply(.drag) alternating medium/large") { n in
    var sheet = Sheet(configuration: configuration, now: now)
    let toMedium = SheetAction.drag(.detent(.medium)), toLarge = SheetAction.drag(.detent(.large))
    for i in 0..<n {
        _ = try! sheet.apply(i & 1 == 0 ? toMedium : toLarge, now: now)
    }
    return sheet.version
}

measure("apply(.drag) to the current detent (no-op)") { n in
    var sheet = Sheet(configuration: configuration, now: now)
    let toLarge = SheetAction.drag(.detent(.large))
    var total: UInt64 = 0
    for _ in 0..<n {
        total &+= UInt64(try! sheet.apply(toLarge, now: now).events.count) &+ 1
    }
    return total &+ sheet.version
}

measure("apply(.gesture) alternating medium/large") { n in
    var sheet = Sheet(configuration: configuration, now: now)
    let down = SheetAction.gesture(DragGesture(translation: 400, velocity: 150))
    let up = SheetAction.gesture(DragGesture(translation: -400, velocity: -150))
    for i in 0..<n {
        _ = try! sheet.apply(i & 1 == 0 ? down : up, now: now)
    }
    return sheet.version
}

measure("resolve(gesture) only") { n in
    let sheet = Sheet(configuration: configuration, now: now)
    var total: UInt64 = 0
    for i in 0..<n {
        let r = sheet.resolve(DragGesture(translation: Double(i & 1023), velocity: 800))
        total &+= UInt64(bitPattern: Int64(r.projectedHeight))
    }
    return total
}

measure("events(after: version - 1)") { n in
    var sheet = Sheet(configuration: configuration, now: now)
    for i in 0..<300 { _ = try! sheet.apply(.drag(.detent(i & 1 == 0 ? .medium : .large)), now: now) }
    var total: UInt64 = 0
    for _ in 0..<n {
        if case .events(let e) = sheet.events(after: sheet.version - 1) { total &+= UInt64(e.count) }
    }
    return total
}

print("")
print("MemoryLayout<Sheet>                size \(MemoryLayout<Sheet>.size), stride \(MemoryLayout<Sheet>.stride)")
print("MemoryLayout<SheetEvent>           size \(MemoryLayout<SheetEvent>.size), stride \(MemoryLayout<SheetEvent>.stride)")
print("MemoryLayout<SheetEvent.Kind>      size \(MemoryLayout<SheetEvent.Kind>.size)")
print("MemoryLayout<GestureResolution?>   size \(MemoryLayout<GestureResolution?>.size)")
print("MemoryLayout<SheetConfiguration>   size \(MemoryLayout<SheetConfiguration>.size)")
print("MemoryLayout<Detent>               size \(MemoryLayout<Detent>.size), stride \(MemoryLayout<Detent>.stride)")
print("MemoryLayout<DragTarget>           size \(MemoryLayout<DragTarget>.size)")
print("MemoryLayout<SheetOutcome>         size \(MemoryLayout<SheetOutcome>.size)")
let full = Sheet.retainedEvents * MemoryLayout<SheetEvent>.stride
print("full event ring: \(Sheet.retainedEvents) × \(MemoryLayout<SheetEvent>.stride) B = \(full) B (+ array header) per session")
