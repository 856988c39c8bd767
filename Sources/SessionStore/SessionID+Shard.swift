import SheetCore

extension SessionID {
    /// Which shard owns this session: ids are uniformly random, so the low bits spread evenly.
    func shardIndex(of count: Int) -> Int { Int(low % UInt64(count)) }
}
