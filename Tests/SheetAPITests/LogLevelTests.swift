import Testing
import SheetObservability

@Suite("Log levels")
struct LogLevelTests {
    /// `rank` is written out case by case; the order is the declaration's.
    @Test func orderIsTheDeclarationOrder() {
        let levels = ServiceObserver.LogLevel.allCases
        for (i, a) in levels.enumerated() {
            for (j, b) in levels.enumerated() {
                #expect((a < b) == (i < j), "\(a) < \(b)")
            }
        }
    }
}
