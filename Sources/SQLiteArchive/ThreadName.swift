#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Gives the calling thread its name in top and perf, through the kernel's own file for it.
/// Foundation's `Thread.name` did not reliably: set before `start()`, the thread kept its
/// creator's name ("MHD-worker"); set by the thread itself, it was lost now and then, as
/// `start()` stores the thread's handle only after the thread may be running. Glibc's
/// `pthread_setname_np` is not visible to Swift without `_GNU_SOURCE`.
func nameCurrentThread(_ name: String) {
    let descriptor = Glibc.open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }   // no /proc: the name is cosmetic
    _ = name.withCString { Glibc.write(descriptor, $0, strlen($0)) }
    Glibc.close(descriptor)
}
