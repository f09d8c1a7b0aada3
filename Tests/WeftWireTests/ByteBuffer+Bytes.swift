import NIOCore

extension ByteBuffer {
    /// The readable bytes, as an array.
    var bytes: [UInt8] { Array(readableBytesView) }
}
