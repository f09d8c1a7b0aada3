import NIOCore
import WeftCrypto

/// Seals frames into records and opens records into frames, once the handshake is done
/// (SPEC.md "Transport records"): `length (u32) | ChaChaPoly(frame)`, where `length` counts the
/// ciphertext and its 16-byte tag.
///
/// Sans-I/O and copy-free on the hot path: frames are encrypted in place in the output buffer,
/// and each is decrypted from the input buffer straight into a buffer of its own.
///
/// The two `CipherState`s are references that own their nonces: a copy of the codec seals and
/// opens with the same counters, so sealing through a copy never reuses a nonce.
public struct TransportCodec: Sendable {
    private let sendCipher: CipherState
    private let receiveCipher: CipherState

    /// Plaintext bytes sealed under the current sending key (for the rekey policy).
    public private(set) var bytesSentSinceRekey: UInt64 = 0

    public init(send: CipherState, receive: CipherState) {
        self.sendCipher = send
        self.receiveCipher = receive
    }

    // MARK: - Sending

    /// Appends one record carrying `frame` to `buffer`.
    public mutating func seal(_ frame: Frame, into buffer: inout ByteBuffer) throws(WeftCryptoError) {
        let frameLength = frame.encodedByteCount
        precondition(frameLength <= WireConstants.maxFrameByteCount, "frame larger than the protocol maximum")
        let recordLength = frameLength + WireConstants.tagByteCount
        buffer.reserveCapacity(minimumWritableBytes: WireConstants.recordLengthByteCount + recordLength)
        buffer.writeInteger(UInt32(recordLength))
        let start = buffer.writerIndex
        frame.write(to: &buffer)
        buffer.writeRepeatingByte(0, count: WireConstants.tagByteCount)
        let result = buffer.withUnsafeMutableBytes(at: start, length: recordLength) { record in
            Result { () throws(WeftCryptoError) in try sendCipher.seal(inPlace: record, plaintextByteCount: frameLength) }
        }
        try result.get()
        bytesSentSinceRekey &+= UInt64(frameLength)
    }

    /// Switches the sending key (after sealing a `.rekey` frame).
    public mutating func rekeySending() {
        sendCipher.rekey()
        bytesSentSinceRekey = 0
    }

    // MARK: - Receiving

    /// Opens the next record in `buffer`, if it is all there. Returns nil (consuming nothing)
    /// when more bytes are needed; throws on a bad length or a failed tag.
    /// A `.rekey` frame switches the receiving key before it is returned.
    public func open(from buffer: inout ByteBuffer) throws(WeftWireError) -> Frame? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        let recordLength = Int(length)
        guard recordLength <= WireConstants.maxFrameByteCount + WireConstants.tagByteCount else {
            throw .frameTooLarge(recordLength - WireConstants.tagByteCount)
        }
        guard recordLength >= WireConstants.frameHeaderByteCount + WireConstants.tagByteCount else {
            throw .malformed("a record of \(recordLength) bytes is shorter than a frame header and tag")
        }
        guard buffer.readableBytes >= WireConstants.recordLengthByteCount + recordLength else { return nil }

        // Decrypted out of the receive buffer into one of the frame's own, in one pass: a
        // slice would keep the whole receive buffer alive for as long as the frame's payload
        // is held (a queued event), and decrypting in place would write into a buffer such a
        // slice may share (a copy of the whole of it). A peer sending thousands of tiny frames
        // in one read made every one of them pin tens of kilobytes that way.
        let start = WireConstants.recordLengthByteCount
        let frameLength = recordLength - WireConstants.tagByteCount
        var frameBytes = ByteBufferAllocator().buffer(capacity: frameLength)
        var opened = false
        buffer.withUnsafeReadableBytes { readable in
            let record = UnsafeRawBufferPointer(rebasing: readable[start..<(start + recordLength)])
            frameBytes.writeWithUnsafeMutableBytes(minimumWritableBytes: frameLength) { output in
                // A failed tag and an exhausted nonce both end the connection as a decryption failure.
                guard let count = try? receiveCipher.open(record, into: output) else { return 0 }
                opened = true
                return count
            }
        }
        guard opened else { throw .decryptionFailed }
        buffer.moveReaderIndex(forwardBy: WireConstants.recordLengthByteCount + recordLength)
        let frame = try Frame.read(from: frameBytes)
        if case .rekey = frame { receiveCipher.rekey() }
        return frame
    }
}

extension ByteBuffer {
    /// Mutable access to `length` readable bytes at absolute index `start`.
    fileprivate mutating func withUnsafeMutableBytes<R>(
        at start: Int, length: Int, _ body: (UnsafeMutableRawBufferPointer) -> R
    ) -> R {
        let offset = start - readerIndex
        return withUnsafeMutableReadableBytes { readable in body(UnsafeMutableRawBufferPointer(rebasing: readable[offset..<(offset + length)]))
        }
    }
}
