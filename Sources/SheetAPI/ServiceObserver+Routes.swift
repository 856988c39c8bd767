import SheetObservability

extension ServiceObserver {
    /// An observer whose request metrics are labelled by this service's route table.
    public convenience init(format: LogFormat = .text, level: LogLevel = .info, log: LogSink = .standardError) {
        self.init(routes: RouteTable.entries.map(\.template), methods: RouteTable.methods, format: format, level: level, log: log)
    }
}
