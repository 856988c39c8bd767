import SheetCore

extension SessionID {
    /// Which shard owns this session: its routing bits, which are uniformly random for a session
    /// presented over no other, and its parent's for one presented over another, so a chain of
    /// sheets lives on one shard and a cascade is one actor turn and one commit.
    func shardIndex(of count: Int) -> Int { Int(UInt64(routingBits) % UInt64(count)) }
}
