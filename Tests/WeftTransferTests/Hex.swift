extension Array where Element == UInt8 {
    /// The bytes of lowercase or uppercase hex digits; traps on anything else (test data only).
    init(hex: String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var chars = hex.utf8.makeIterator()
        while let high = chars.next(), let low = chars.next() {
            bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
        }
        self = bytes
    }

    var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] }, as: UTF8.self)
    }
}
