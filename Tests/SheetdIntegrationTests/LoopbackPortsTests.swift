import Testing

@Suite("Loopback ports for test servers")
struct LoopbackPortsTests {
    /// The kernel gives ports of its ephemeral range to outgoing connections and port-0 binds at
    /// any moment; an unshared port must not be one of them, nor another pick of this run.
    @Test func portsComeFromBelowTheEphemeralRangeAndDiffer() throws {
        let range = try #require(LoopbackPorts.ephemeralRange())
        let ports = try (0..<64).map { _ in try LoopbackPorts.unshared() }
        #expect(Set(ports).count == ports.count)
        for port in ports {
            #expect(port >= 1_024 && port < range.lowerBound, "port \(port), ephemeral range \(range)")
        }
    }
}
