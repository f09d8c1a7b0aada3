import WeftCrypto

/// The journal of a partial content (SPEC.md §11.2): a header naming the content, then one
/// fixed-size record for each verified chunk, appended only after the chunk's bytes were made
/// durable in the partial file. Each part carries a BLAKE2b-32 checksum of its bytes, so a
/// reader tells a record torn by a crash from a whole one.
///
/// Header (56 bytes): magic `"WEFTCJ"` (6) || version (1) || root (32) || total size u64 ||
/// chunk log u8 || chunk count u32 || BLAKE2b-32 of the 52 bytes before it.
/// Record (40 bytes): chunk index u32 || the chunk's hash (32) || BLAKE2b-32 of the 36 bytes
/// before it.
enum ChunkJournal {
    static let magic: [UInt8] = Array("WEFTCJ".utf8)
    static let version: UInt8 = 1
    static let checksumByteCount = 4
    static let headerByteCount = 56
    static let recordByteCount = 40
    /// The length of a chunk hash in a record.
    static let hashByteCount = 32
    /// A writer appends at most this many records between two syncs of the journal, so a crash
    /// can tear only the last this many (SPEC.md §11.2); a bad record before them is damage.
    static let maxUnsyncedRecords = 16

    static func checksum(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        BLAKE2b.hash(Array(bytes), outputByteCount: checksumByteCount)
    }

    // MARK: - Writing

    /// The header naming `root` and its layout.
    static func header(root: ContentStore.Root, layout: ContentStore.Layout) -> [UInt8] {
        var bytes = magic
        bytes.append(version)
        bytes += root.bytes
        bytes.appendBigEndian(layout.totalSize)
        bytes.append(layout.chunkLog)
        bytes.appendBigEndian(layout.chunkCount)
        bytes += checksum(bytes[...])
        return bytes
    }

    /// The record of chunk `index`, verified against `hash` (32 bytes).
    static func record(index: UInt32, hash: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(recordByteCount)
        bytes.appendBigEndian(index)
        bytes += hash
        bytes += checksum(bytes[...])
        return bytes
    }

    // MARK: - Reading

    /// What the first bytes of a journal say.
    enum Header: Equatable {
        /// Fewer bytes than a header: a crash while the journal was created, before its header
        /// was durable (and so before any record was written).
        case absent
        /// A whole header that is not one Weft writes, and why, in a few words.
        case damaged(String)
        case valid(root: ContentStore.Root, layout: ContentStore.Layout)
    }

    static func readHeader(_ bytes: [UInt8]) -> Header {
        guard bytes.count >= headerByteCount else { return .absent }
        let header = bytes[0..<headerByteCount]
        guard header.prefix(magic.count).elementsEqual(magic) else { return .damaged("its magic is not \"WEFTCJ\"") }
        guard checksum(header.prefix(headerByteCount - checksumByteCount)).elementsEqual(header.suffix(checksumByteCount)) else {
            return .damaged("its header fails its checksum")
        }
        guard header[6] == version else { return .damaged("its version is \(header[6]), not \(version)") }
        // The checksum holds, so every field below is as some writer wrote it.
        guard let root = try? ContentStore.Root(Array(header[7..<39])),
            let layout = try? ContentStore.Layout(
                totalSize: header.bigEndian(UInt64.self, at: 39), chunkLog: header[47],
                chunkCount: header.bigEndian(UInt32.self, at: 48))
        else { return .damaged("its header names a layout the store cannot hold") }
        return .valid(root: root, layout: layout)
    }

    /// What reading the records found.
    struct Scan {
        /// The chunks the good records name.
        var verified: VerifiedChunks
        /// Where the good records end: the journal's length once the rest is cut.
        var goodByteCount: Int
        /// How many bad or partial records at the end (a torn tail) are to be cut.
        var tornRecordCount: Int
        /// A bad record before the tail: the journal is damaged and names nothing, and why.
        var damage: String?
    }

    /// Reads the records of a journal of `fileSize` bytes with a valid header for `layout`,
    /// a block at a time. A record is bad if its checksum fails, its index is not below the
    /// chunk count, or it names a chunk an earlier record named (Weft writes each once).
    /// The first bad record (or a partial one) and everything after it is a torn tail if it
    /// is among the last `maxUnsyncedRecords` records; earlier, the journal is damaged.
    /// `record` sees each good record, in order.
    static func scan(
        _ file: ContentFile, fileSize: Int, layout: ContentStore.Layout,
        record: (Int, ArraySlice<UInt8>) -> Void = { _, _ in }
    ) throws -> Scan {
        let wholeRecords = (fileSize - headerByteCount) / recordByteCount
        let partialBytes = (fileSize - headerByteCount) % recordByteCount
        let tailStart = max(0, wholeRecords - maxUnsyncedRecords)
        var verified = VerifiedChunks(chunkCount: layout.chunkCountValue)
        let recordsPerBlock = 1638  // 65,520 bytes
        var number = 0
        while number < wholeRecords {
            let count = min(recordsPerBlock, wholeRecords - number)
            let block = try file.read(count: count * recordByteCount, at: headerByteCount + number * recordByteCount)
            for offset in stride(from: 0, to: block.count, by: recordByteCount) {
                let bytes = block[offset..<offset + recordByteCount]
                let body = bytes.prefix(recordByteCount - checksumByteCount)
                let index = Int(bytes.bigEndian(UInt32.self, at: offset))
                var problem: String?
                if !checksum(body).elementsEqual(bytes.suffix(checksumByteCount)) {
                    problem = "fails its checksum"
                } else if index >= layout.chunkCountValue {
                    problem = "names chunk \(index) of \(layout.chunkCount)"
                } else if verified.contains(index) {
                    problem = "names chunk \(index) a second time"
                }
                if let problem {
                    if number >= tailStart {
                        return Scan(
                            verified: verified, goodByteCount: headerByteCount + number * recordByteCount,
                            tornRecordCount: wholeRecords - number + (partialBytes > 0 ? 1 : 0), damage: nil)
                    }
                    return Scan(
                        verified: VerifiedChunks(chunkCount: layout.chunkCountValue), goodByteCount: headerByteCount,
                        tornRecordCount: 0, damage: "record \(number + 1) of \(wholeRecords) \(problem)")
                }
                verified.insert(index)
                record(index, bytes.dropFirst(4).prefix(hashByteCount))
                number += 1
            }
        }
        return Scan(
            verified: verified, goodByteCount: headerByteCount + wholeRecords * recordByteCount,
            tornRecordCount: partialBytes > 0 ? 1 : 0, damage: nil)
    }
}

// MARK: - Big-endian fields

extension [UInt8] {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}

extension ArraySlice<UInt8> {
    /// The big-endian integer at `offset` (an index of the slice's base); the caller checked
    /// that its bytes are there.
    func bigEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        self[offset..<offset + MemoryLayout<T>.size].reduce(T.zero) { $0 << 8 | T($1) }
    }
}
