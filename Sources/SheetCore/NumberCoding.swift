extension KeyedEncodingContainer {
    /// Writes whole numbers as JSON integers (`844`, not `844.0`) and others as the shortest
    /// decimal, so answers read like the request a person would have written. Non-finite values
    /// never reach here (configuration and gestures refuse them), but are written as 0 rather
    /// than failing an encode.
    mutating func encodeNumber(_ value: Double, forKey key: Key) throws {
        if !value.isFinite {
            try encode(0, forKey: key)
        } else if abs(value) <= 9_007_199_254_740_992, Double(Int64(value)) == value {
            // (`Double.rounded()` would pull in libm, which a Foundation-free module does not link.)
            try encode(Int64(value), forKey: key)
        } else {
            try encode(value, forKey: key)
        }
    }
}
