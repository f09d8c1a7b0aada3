extension ContentStore {
    /// The 32 bytes that name a content (the root of its hash tree; opaque to the store). On
    /// disk, as 64 lowercase hex digits.
    public struct Root: Hashable, Sendable, CustomStringConvertible {
        public static let byteCount = 32
        public let bytes: [UInt8]

        /// Throws `.invalidRoot` unless `bytes` is 32 bytes.
        public init(_ bytes: [UInt8]) throws {
            guard bytes.count == Self.byteCount else {
                throw ContentStoreError(.invalidRoot, "A content root is 32 bytes, not \(bytes.count).")
            }
            self.bytes = bytes
        }

        /// The root whose hex form is `hex` (64 lowercase digits, as file names are), or nil.
        init?(hex: Substring) {
            guard hex.utf8.count == 2 * Self.byteCount else { return nil }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(Self.byteCount)
            var high: UInt8?
            for c in hex.utf8 {
                let nibble: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = c - UInt8(ascii: "a") + 10
                default: return nil
                }
                if let h = high {
                    bytes.append(h << 4 | nibble)
                    high = nil
                } else {
                    high = nibble
                }
            }
            self.bytes = bytes
        }

        /// 64 lowercase hex digits: the name of the content's files.
        public var hex: String {
            let digits = Array("0123456789abcdef".utf8)
            var text: [UInt8] = []
            text.reserveCapacity(2 * bytes.count)
            for byte in bytes {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 15)])
            }
            return String(decoding: text, as: UTF8.self)
        }

        public var description: String { hex }
    }

    /// How a content is cut into chunks: `chunkCount` chunks of 2^`chunkLog` bytes, the last
    /// holding what is left (1 to 2^`chunkLog` bytes) of `totalSize`.
    public struct Layout: Hashable, Sendable, CustomStringConvertible {
        public let totalSize: UInt64
        public let chunkLog: UInt8
        public let chunkCount: UInt32

        /// Throws `.invalidLayout` for no bytes, a chunk log outside `ContentStore.chunkLogRange`,
        /// a chunk count other than ⌈totalSize / 2^chunkLog⌉, or more than
        /// `ContentStore.maxChunkCount` chunks.
        public init(totalSize: UInt64, chunkLog: UInt8, chunkCount: UInt32) throws {
            guard totalSize > 0 else { throw ContentStoreError(.invalidLayout, "Content of no bytes has no chunks to store.") }
            guard ContentStore.chunkLogRange.contains(chunkLog) else {
                throw ContentStoreError(
                    .invalidLayout,
                    "A chunk log of \(chunkLog) is outside \(ContentStore.chunkLogRange.lowerBound)...\(ContentStore.chunkLogRange.upperBound).")
            }
            let expected = (totalSize - 1) >> UInt64(chunkLog) + 1
            guard UInt64(chunkCount) == expected else {
                throw ContentStoreError(
                    .invalidLayout, "\(totalSize) bytes in chunks of \(1 << Int(chunkLog)) make \(expected) chunks, not \(chunkCount).")
            }
            guard Int(chunkCount) <= ContentStore.maxChunkCount else {
                throw ContentStoreError(
                    .invalidLayout, "\(chunkCount) chunks is more than the \(ContentStore.maxChunkCount) the store holds for one content.")
            }
            self.totalSize = totalSize
            self.chunkLog = chunkLog
            self.chunkCount = chunkCount
        }

        /// The layout of `totalSize` bytes in chunks of 2^`chunkLog`.
        public init(totalSize: UInt64, chunkLog: UInt8) throws {
            let count = totalSize == 0 ? 0 : (totalSize - 1) >> UInt64(min(chunkLog, 63)) + 1
            try self.init(totalSize: totalSize, chunkLog: chunkLog, chunkCount: UInt32(clamping: count))
        }

        /// 2^`chunkLog`.
        public var chunkSize: Int { 1 << Int(chunkLog) }
        var chunkCountValue: Int { Int(chunkCount) }

        /// The length of chunk `index` (the chunk size, less for the last); 0 out of range.
        public func byteCount(ofChunk index: Int) -> Int {
            guard index >= 0, index < chunkCountValue else { return 0 }
            return index < chunkCountValue - 1 ? chunkSize : Int(totalSize) - (chunkCountValue - 1) * chunkSize
        }

        /// Where chunk `index` starts in the content.
        func offset(ofChunk index: Int) -> Int { index << Int(chunkLog) }

        /// Where chunks `range` lie in the content, in bytes: throws unless the range is inside it.
        func bytes(ofChunks range: Range<Int>, of root: Root) throws -> Range<Int> {
            guard range.lowerBound >= 0, range.upperBound <= chunkCountValue else {
                throw ContentStoreError(
                    .chunkOutOfRange, "Chunks \(range.lowerBound)..<\(range.upperBound) are not all among the \(chunkCount) of content \(root).")
            }
            guard !range.isEmpty else { return 0..<0 }
            let end = range.upperBound == chunkCountValue ? Int(totalSize) : offset(ofChunk: range.upperBound)
            return offset(ofChunk: range.lowerBound)..<end
        }

        /// The bytes chunks `range` hold: throws unless the range is inside the content and
        /// holds at most `ContentStore.maxReadByteCount` bytes.
        func checkRead(_ range: Range<Int>, of root: Root) throws -> Int {
            let byteCount = try bytes(ofChunks: range, of: root).count
            guard byteCount <= ContentStore.maxReadByteCount else {
                throw ContentStoreError(
                    .readTooLarge, "A read of \(byteCount) bytes is over the \(ContentStore.maxReadByteCount) one read returns.")
            }
            return byteCount
        }

        /// `checkRead(_:of:)`, and that `buffer` has room for the bytes read.
        func checkRead(_ range: Range<Int>, of root: Root, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
            let byteCount = try checkRead(range, of: root)
            guard buffer.count >= byteCount else {
                throw ContentStoreError(
                    .readTooLarge, "A read of \(byteCount) bytes does not fit the \(buffer.count) bytes given for it.")
            }
            return byteCount
        }

        /// "1048576 bytes in 256 chunks of 4096".
        public var description: String { "\(totalSize) bytes in \(chunkCount) chunks of \(chunkSize)" }
    }
}
