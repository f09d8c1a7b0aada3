extension Array where Element == UInt8 {
    init(hex: String) {
        var bytes: [UInt8] = []
        var chars = hex.utf8.makeIterator()
        while let hi = chars.next(), let lo = chars.next() {
            bytes.append(UInt8(String(decoding: [hi, lo], as: UTF8.self), radix: 16)!)
        }
        self = bytes
    }

    var hex: String { map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined() }
}
