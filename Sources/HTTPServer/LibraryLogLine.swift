/// Which of libmicrohttpd's log lines are faults, and which only say that a client went away in
/// the middle of an exchange: it closed or reset its socket while its request was arriving or
/// its answer was leaving, or an event stream ended because its client left (`HTTPStream.read`
/// ends such a stream with an error, which the library reports as the application's). A client
/// leaving is not a fault of the server, and the request's own log line already says the client
/// is gone, so these go to `HTTPServerConfiguration.departureLog`, not to `errorLog`.
///
/// The wording is libmicrohttpd 0.9.75's (Debian's); a line it does not recognise stays an error.
enum LibraryLogLine {
    /// Whole lines that mean the client left.
    private static let departures: Set<String> = [
        "Socket has been disconnected when reading request.",
        "Connection was closed by remote side with incomplete request.",
        "Closing connection (application error generating response).",
    ]
    /// Lines that end with the reason a read or a send failed: a departure when the reason is one
    /// of `peerGoneReasons` (resources or a bad descriptor stay errors).
    private static let failurePrefixes = [
        "Connection socket is closed when reading request due to the error: ",
        "Failed to send ",
    ]
    private static let peerGoneReasons = [
        "detected connection closure",
        "The connection was forcibly closed by remote peer",
        "The socket is no longer available for sending",
        "The socket is not connected",
    ]

    static func isClientDeparture(_ line: String) -> Bool {
        let line = line.hasSuffix("\n") ? String(line.dropLast()) : line
        if departures.contains(line) { return true }
        return failurePrefixes.contains { line.hasPrefix($0) } && peerGoneReasons.contains { line.hasSuffix($0) }
    }
}
