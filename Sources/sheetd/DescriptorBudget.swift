import Dispatch
import HTTPServer

/// The descriptors sheetd itself needs, settled before the first connection is accepted.
/// Connections may then take every descriptor the open-file limit leaves (the accept loop waits
/// for one to be freed, and says so once), so whatever sheetd still needs must be taken before,
/// or be left room for.
///
/// libdispatch, which runs every sleeping task's timer, makes its event loop's descriptors (an
/// epoll set and an eventfd) the first time a timer needs them, and aborts the process when it
/// cannot. Left to the first sleep after start-up, that could come after connections had taken
/// the last descriptor: sheetd would crash where it should only stop accepting. So they are
/// taken first. Its timerfds (one per clock) are made when a timer on that clock is first armed,
/// which may be later; a failure there only delays that clock's timers, but the server keeps
/// room for them (`HTTPServerConfiguration.descriptorsKeptFree`), so that they do not take the
/// one descriptor a connection was counted on.
enum DescriptorBudget {
    /// libdispatch's event loop: its epoll set and its eventfd.
    static let eventLoopDescriptors = 2
    /// libdispatch's timerfds, one for each of its three clocks.
    static let timerDescriptors = 3

    /// Takes the event loop's descriptors: fires one timer on each clock sheetd's tasks sleep
    /// on (the continuous clock, and the uptime clock of `DispatchTime`) and waits for both. A
    /// timer fires only from the event loop, so its descriptors exist once one has. Returns
    /// false, having taken nothing, when the limit leaves no room for them and the timerfds.
    static func takeEventLoopDescriptors() -> Bool {
        guard OpenFileLimit.hasRoom(for: eventLoopDescriptors + timerDescriptors) else { return false }
        let fired = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { fired.signal() }
        Task.detached {
            try? await Task.sleep(for: .milliseconds(1))
            fired.signal()
        }
        fired.wait()
        fired.wait()
        return true
    }
}
