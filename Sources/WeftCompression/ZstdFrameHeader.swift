private import CZstd

/// What the header of a zstd frame says, read without decoding the frame (RFC 8878 §3.1.1.1).
public enum ZstdFrameHeader {
    /// The four bytes that start a (non-skippable) zstd frame: 0xFD2FB528, little-endian.
    public static let magic: [UInt8] = [0x28, 0xb5, 0x2f, 0xfd]

    /// The content size declared by the header of the frame `input` starts with, or nil when
    /// `input` does not start with a zstd frame (skippable frames included), its header is
    /// incomplete or invalid, or the header declares no size.
    public static func declaredContentSize(_ input: UnsafeRawBufferPointer) -> UInt64? {
        guard input.count >= magic.count, input.prefix(magic.count).elementsEqual(magic) else { return nil }
        let size = ZSTD_getFrameContentSize(input.baseAddress, input.count)
        // ZSTD_CONTENTSIZE_UNKNOWN and ZSTD_CONTENTSIZE_ERROR are the two largest values.
        guard size < UInt64.max - 1 else { return nil }
        return size
    }

    public static func declaredContentSize(_ input: [UInt8]) -> UInt64? {
        input.withUnsafeBytes { declaredContentSize($0) }
    }
}
