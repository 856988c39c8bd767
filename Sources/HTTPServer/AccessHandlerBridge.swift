import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The bridge from libmicrohttpd's synchronous access handler to async Swift.
//
// Per request (keep-alive, small POST): first call (head) → body call(s) → final call: the
// responder's `respondInPlace` answers what it can without a task (queued at once); else start
// a Task.immediate whose executor preference (the RequestContext) runs its jobs on this thread
// while the handler is inside the call → if the answer is stored when it returns, queue it at
// once (no suspend/resume, no other thread); else suspend, and the task stores the answer and
// calls MHD_resume_connection → the handler's next call queues it.
// Thread hops: none when the responder does not wait (entering a free actor included); when it
// waits, two: libmicrohttpd thread → Swift executor → (resume) libmicrohttpd thread.

// MARK: - C entry points (they capture nothing; context travels in `cls`)

/// MHD_AccessHandlerCallback. `cls` is the ServerCore (retained by HTTPServer while the daemon runs).
let accessHandlerCallback: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadDataSize, conCls in
    guard let cls, let connection, let uploadDataSize, let conCls else { return MHD_Result.NO }
    // Borrowed, not retained: the server outlives its daemon's callbacks, and a retain of the one
    // object every request thread shares moves its cache line between cores on every call.
    return Unmanaged<ServerCore>.fromOpaque(cls)._withUnsafeGuaranteedRef { core in
        if let existing = conCls.pointee {
            return Unmanaged<RequestContext>.fromOpaque(existing)._withUnsafeGuaranteedRef { context in
                core.continueRequest(context, uploadData: uploadData, uploadDataSize: uploadDataSize)
            }
        }
        return core.beginRequest(connection: connection, url: url, method: method, version: version, conCls: conCls)
    }
}

/// MHD_RequestCompletedCallback: called for every request whose handler ran, also when the client
/// went away. Releases the RequestContext retained in `beginRequest`.
let requestCompletedCallback: MHD_RequestCompletedCallback = { cls, _, conCls, toe in
    guard let cls, let conCls, let raw = conCls.pointee else { return }
    conCls.pointee = nil
    // Balances the passRetained in `beginRequest`.
    let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
    // 0: MHD_REQUEST_TERMINATED_COMPLETED_OK (a plain C enum in Swift)
    Unmanaged<ServerCore>.fromOpaque(cls)._withUnsafeGuaranteedRef { $0.requestCompleted(context, normally: toe.rawValue == 0) }
}

/// MHD_NotifyConnectionCallback: counts open connections and tracks each one's request-receive
/// deadline (ConnectionState in `*socket_context`).
let notifyConnectionCallback: MHD_NotifyConnectionCallback = { cls, connection, socketContext, toe in
    guard let cls, let connection, let socketContext else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    if toe.rawValue == 0 { // MHD_CONNECTION_NOTIFY_STARTED
        let state = ConnectionState(
            fd: sheetd_connection_fd(connection),
            clientAddress: clientAddress(of: connection),
            now: core.clockNanoseconds(),
            connection: connection,
            thread: sheetd_thread_id())
        // Released below at MHD_CONNECTION_NOTIFY_CLOSED, which libmicrohttpd calls for every
        // connection it reported STARTED (before it closes the socket).
        socketContext.pointee = Unmanaged.passRetained(state).toOpaque()
        core.connections.opened(state)
        // Counted only now: whoever sees the connection open also finds its deadline's start
        // already read from the clock and the connection tracked by the sweeper.
        core.openConnections.add(1, ordering: .releasing)
    } else {
        core.openConnections.subtract(1, ordering: .relaxed)
        core.acceptor.connectionClosed()
        // After both counts: shutdown waits on the acceptor's.
        core.countersWentDown()
        if let raw = socketContext.pointee {
            socketContext.pointee = nil
            // Balances the passRetained at STARTED.
            let state = Unmanaged<ConnectionState>.fromOpaque(raw).takeRetainedValue()
            core.connections.closed(state)
            // libmicrohttpd closes the socket right after this call: if the client may still be
            // sending, let it finish rather than reset the connection under the answer.
            if state.lingers.load(ordering: .relaxed) || sheetd_socket_unread(state.fd) > 0 {
                core.watcher.linger(fd: state.fd, now: core.clockNanoseconds())
            }
        }
    }
}

/// sheetd_log_fn: libmicrohttpd's formatted error messages.
let errorLogCallback: sheetd_log_fn = { ctx, message in
    guard let ctx, let message else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(ctx).takeUnretainedValue()
    let line = String(cString: message)
    core.answerContentLengthRefusal(logLine: line)
    if LibraryLogLine.isClientDeparture(line) {
        core.departureLog(line)
    } else {
        core.errorLog(line)
    }
}

/// MHD_ContentReaderCallback for streams. `cls` is the HTTPStream retained in `makeMHDResponse`.
let streamReaderCallback: MHD_ContentReaderCallback = { cls, _, buffer, max in
    guard let cls, let buffer else { return sheetd_reader_end_with_error }
    let stream = Unmanaged<HTTPStream>.fromOpaque(cls).takeUnretainedValue()
    return stream.read(into: buffer, max: max)
}

/// MHD_ContentReaderFreeCallback for streams: the response is gone.
let streamFreeCallback: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    // Balances the passRetained in `makeMHDResponse`.
    let stream = Unmanaged<HTTPStream>.fromOpaque(cls).takeRetainedValue()
    stream.responseReleased()
}

// MARK: - Request handling (on the connection's libmicrohttpd thread)

extension ServerCore {
    /// First call: the head is in. Build it, check the limits, ask preflight.
    func beginRequest(
        connection: OpaquePointer,
        url: UnsafePointer<CChar>?,
        method: UnsafePointer<CChar>?,
        version: UnsafePointer<CChar>?,
        conCls: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        let started = sheetd_monotonic_ns()
        let connectionState = sheetd_socket_context(connection).map {
            Unmanaged<ConnectionState>.fromOpaque($0).takeUnretainedValue()
        }
        connectionState?.headPending = false
        var (head, refusal, framing) = readHead(connection: connection, url: url, method: method, version: version,
                                                connectionState: connectionState)
        // Counted before `isStopping` is read, as shutdown sets it before reading the count;
        // the context made below takes it back in NOTIFY_COMPLETED.
        requestsInProgress.add(1, ordering: .relaxed)
        var machine = RequestStateMachine(limits: limits)
        let action = machine.headReceived(
            headerCount: head.headers.count,
            contentLength: framing.contentLength,
            ambiguousLength: framing.ambiguousLength,
            refusal: refusal,
            shuttingDown: isStopping.load(ordering: .relaxed)
        )
        // The answer given at once, if any, is made before the context: the head then moves into
        // it, neither copied nor reached through the context (an exclusivity check) afterwards.
        let early: HTTPResponse?
        switch action {
        case .reject(let rejection):
            var response = rejection == .serviceUnavailable
                ? shutdownAnswer(head) : responder.rejection(rejection, head: head)
            if rejection.closesConnection {
                response.headers.replace("Connection", "close")
            }
            early = response
        case .proceed:
            var tag = -1
            early = responder.preflight(head, tag: &tag)
            head.tag = tag
            if early != nil { machine.answeredEarly() }
        }
        let context = RequestContext(connection: connection, startedNanoseconds: started, machine: machine, head: consume head)
        context.connectionState = connectionState
        // Released in requestCompletedCallback (NOTIFY_COMPLETED), which libmicrohttpd calls for
        // every request whose access handler ran.
        conCls.pointee = Unmanaged.passRetained(context).toOpaque()
        if let early {
            context.connectionState?.markBusy()
            context.connectionState?.lingerOnClose()
            return queue(early, for: context)
        }
        if let contentLength = framing.contentLength, contentLength > 0 {
            context.body.reserveCapacity(contentLength)
        }
        return MHD_Result.YES
    }

    /// Body chunks, the final call, and the call after a resume.
    func continueRequest(
        _ context: RequestContext,
        uploadData: UnsafePointer<CChar>?,
        uploadDataSize: UnsafeMutablePointer<Int>
    ) -> MHD_Result {
        let size = uploadDataSize.pointee
        if size > 0 {
            uploadDataSize.pointee = 0
            context.bytesIn += size
            switch context.machine.bodyChunk(count: size) {
            case .append:
                if let uploadData {
                    context.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: size))
                }
                return MHD_Result.YES
            case .discard:
                if context.body.capacity > 0 { context.body = [] }
                return MHD_Result.YES
            case .abort:
                errorLog("closing a connection whose chunked body went far past the \(limits.maxBodySize)-byte limit")
                return MHD_Result.NO
            }
        }
        let complete = context.machine.requestComplete()
        context.connectionState?.markBusy()
        switch complete {
        case .respond:
            return suspendAndRespond(context)
        case .reject(let rejection):
            return queue(responder.rejection(rejection, head: context.head), for: context)
        case .queueAnswer:
            guard let answer = context.takeAnswer() else {
                errorLog("resumed request without an answer: closing the connection")
                context.machine.fail()
                return MHD_Result.NO
            }
            return queue(answer, for: context)
        case .abort:
            errorLog("unexpected access-handler call for \(context.head.method) \(context.head.path): closing the connection")
            return MHD_Result.NO
        }
    }

    /// Final call: first ask the responder for an answer it can give right here, without a task
    /// (`respondInPlace`), or to take the request on and give the answer later itself (a
    /// `DeferredAnswer`, no task either). Else run the responder in a task that starts right
    /// here. If the answer is in without waiting (an uncontended actor included: see
    /// `RequestContext.enqueue`), queue it in this same call: no suspension, no other thread.
    /// Otherwise suspend the connection; whoever answers resumes it (`RequestContext.Delivery`
    /// settles who does what).
    private func suspendAndRespond(_ context: RequestContext) -> MHD_Result {
        let request = HTTPRequest(head: context.head, body: context.body)
        context.body = []
        context.core = self
        // `responder` is read in place, not copied: a copy retains the one service object every
        // request thread shares. Only the task below keeps a copy.
        switch self.responder.respondInPlace(to: request, later: DeferredAnswer(context)) {
        case .answered(let answer):
            context.machine.answeredInPlace()
            return queue(answer, for: context)
        case .deferred:
            break
        case .declined:
            let responder = self.responder
            context.runInline {
                Task.immediate(executorPreference: context) {
                    let response = await responder.respond(to: request)
                    context.resolve(response, core: self)
                }
            }
        }
        if context.answeredInline {
            return queueStoredAnswer(context)
        }
        context.deadline = clock.now + suspendedRequestDeadline
        suspensionBegan()
        requestSuspensions.add(1, ordering: .relaxed)
        MHD_suspend_connection(context.connection)
        guard context.handOverToResolver() else {
            // The answer came from another thread between the check and the suspension: resume
            // ourselves; the next call (`.queueAnswer`) queues it.
            MHD_resume_connection(context.connection)
            suspensionEnded()
            return MHD_Result.YES
        }
        // Published only now: the sweeper and shutdown resolve suspended requests only.
        guard registry.add(context) else {
            // Shutdown closed the registry: answer 503 ourselves (resumes the connection).
            context.resolve(shutdownAnswer(context.head), core: self)
            return MHD_Result.YES
        }
        context.isRegistered = true
        return MHD_Result.YES
    }

    /// The answer arrived within the final call itself: queue it now.
    private func queueStoredAnswer(_ context: RequestContext) -> MHD_Result {
        guard case .queueAnswer = context.machine.requestComplete(), let answer = context.takeAnswer() else {
            errorLog("answered request without a stored answer: closing the connection")
            context.machine.fail()
            return MHD_Result.NO
        }
        return queue(answer, for: context)
    }

    /// NOTIFY_COMPLETED: the request is over.
    func requestCompleted(_ context: RequestContext, normally: Bool) {
        requestsInProgress.subtract(1, ordering: .releasing)
        countersWentDown()
        context.cancel()
        if context.isRegistered { registry.remove(context) }
        let now = sheetd_monotonic_ns()
        if let connectionState = context.connectionState {
            connectionState.markReceiving(now: clockNanoseconds())
        }
        var bytesOut = context.bytesOut
        var normally = normally
        if let stream = context.stream {
            bytesOut = stream.bytesSent
            // A stream whose client left is ended like a finished one (`HTTPStream.read`).
            if stream.clientLeft { normally = false }
        }
        responder.completed(HTTPExchangeRecord(
            head: context.head,
            status: context.status,
            bytesIn: context.bytesIn,
            bytesOut: bytesOut,
            elapsedNanoseconds: now - context.startedNanoseconds,
            completedNormally: normally,
            responseHeaders: context.responseHeaders
        ))
    }

    // MARK: - Answers

    /// Builds the libmicrohttpd response and queues it on the request's connection.
    private func queue(_ response: HTTPResponse, for context: RequestContext) -> MHD_Result {
        let status = (100...999).contains(response.status) ? response.status : 500
        if status != response.status {
            errorLog("invalid status \(response.status) for \(context.head.method) \(context.head.path): answering 500")
        }
        guard let mhdResponse = makeMHDResponse(response, for: context) else {
            errorLog("could not create a response for \(context.head.method) \(context.head.path)")
            context.machine.fail()
            return MHD_Result.NO
        }
        response.headers.forEachCString { name, value in
            if MHD_add_response_header(mhdResponse, name, value) != MHD_Result.YES {
                errorLog("libmicrohttpd refused response header \(String(cString: name)) (it refuses empty values and control characters)")
            }
        }
        context.status = status
        context.responseHeaders = response.headers
        let result = MHD_queue_response(context.connection, UInt32(status), mhdResponse)
        MHD_destroy_response(mhdResponse)
        if result != MHD_Result.YES {
            errorLog("MHD_queue_response failed for \(context.head.method) \(context.head.path)")
            context.machine.fail()
        }
        return result
    }

    private func makeMHDResponse(_ response: HTTPResponse, for context: RequestContext) -> OpaquePointer? {
        switch response.body {
        case .bytes(let bytes):
            context.bytesOut = bytes.count
            if bytes.isEmpty {
                return MHD_create_response_from_buffer(0, nil, MHD_ResponseMemoryMode.RESPMEM_PERSISTENT)
            }
            return bytes.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
            }
        case .stream(let stream):
            // Released in streamFreeCallback, which libmicrohttpd calls when it destroys the
            // response (also when creation fails below: then we release it here).
            let cls = Unmanaged.passRetained(stream).toOpaque()
            guard let mhdResponse = MHD_create_response_from_callback(
                sheetd_size_unknown, 4096, streamReaderCallback, cls, streamFreeCallback)
            else {
                Unmanaged<HTTPStream>.fromOpaque(cls).release()
                stream.abandon()
                return nil
            }
            context.stream = stream
            let fd = sheetd_connection_fd(context.connection)
            if fd >= 0 && streamSendBufferSize > 0 {
                // A small send buffer keeps "how far behind is this client" honest (loopback
                // buffers grow to megabytes otherwise).
                _ = sheetd_set_send_buffer(fd, streamSendBufferSize)
            }
            stream.attach(connection: context.connection, fd: fd, core: self)
            if !registry.add(stream) {
                // Shutting down: send what is queued, then end.
                stream.finish()
            }
            return mhdResponse
        }
    }
}

