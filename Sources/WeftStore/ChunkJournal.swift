import WeftCrypto

/// The journal of a partial content (SPEC.md §11.2): a header naming the content, then
/// fixed-size records: one for each verified chunk, appended right after the chunk's bytes
/// were written (so a process that dies keeps every record it wrote: the kernel holds both),
/// and now and then a **sync mark** saying how many chunk records before it had their bytes
/// made durable (`fdatasync`) before the mark was written. After a power loss only the chunk
/// records a mark covers are trusted as they are; the others are checked against their chunk's
/// bytes when the content is opened. Each record carries a BLAKE2b-32 checksum of its bytes,
/// so a reader tells a record torn by a crash from a whole one.
///
/// Header (56 bytes): magic `"WEFTCJ"` (6) || version (1) || root (32) || total size u64 ||
/// chunk log u8 || chunk count u32 || BLAKE2b-32 of the 52 bytes before it.
/// Chunk record (40 bytes): chunk index u32 || the chunk's hash (32) || BLAKE2b-32 of the 36
/// bytes before it. Sync mark (40 bytes): `ffffffff` || chunk records covered u32 || 28 zero
/// bytes || BLAKE2b-32 of the 36 bytes before it.
enum ChunkJournal {
    static let magic: [UInt8] = Array("WEFTCJ".utf8)
    static let version: UInt8 = 2
    static let checksumByteCount = 4
    static let headerByteCount = 56
    static let recordByteCount = 40
    /// The length of a chunk hash in a record.
    static let hashByteCount = 32
    /// The index field of a sync mark (no chunk index reaches it: at most 2^24 chunks).
    static let syncMarkIndex = UInt32.max

    static func checksum(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        BLAKE2b.hash(Array(bytes), outputByteCount: checksumByteCount)
    }

    /// A chunk's leaf hash (SPEC.md §17.3): BLAKE2b-256(0x00 || chunk), what a chunk record
    /// holds; opening checks the bytes of records no sync mark covers against it.
    static func leafHash(of chunk: UnsafeRawBufferPointer) -> [UInt8] {
        let hasher = BLAKE2b.Hasher(outputByteCount: hashByteCount)
        hasher.update([0x00])
        hasher.update(rawBytes: chunk)
        return hasher.finalize()
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

    /// A sync mark: the first `covered` chunk records of the journal name chunks whose bytes
    /// were durable before it was written.
    static func syncMark(covering covered: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(recordByteCount)
        bytes.appendBigEndian(syncMarkIndex)
        bytes.appendBigEndian(UInt32(clamping: covered))
        bytes += [UInt8](repeating: 0, count: hashByteCount - 4)
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

    /// A chunk record no sync mark covers: its chunk's bytes are checked before it is trusted.
    struct UncoveredRecord {
        var index: Int
        var hash: ArraySlice<UInt8>
        /// Where the record starts in the journal.
        var offset: Int
    }

    /// What reading the records found.
    struct Scan {
        /// The chunks the good records name.
        var verified: VerifiedChunks
        /// Where the good records end: the journal's length once the rest is cut.
        var goodByteCount: Int
        /// Good chunk records in all, and how many of the first of them the last good sync
        /// mark covers.
        var chunkRecordCount: Int
        var coveredCount: Int
        /// The good chunk records after those the last sync mark covers, in order.
        var uncovered: [UncoveredRecord]
        /// How many records at the end (the first bad or partial one and all after it) are cut.
        var cutRecordCount: Int
    }

    /// Reads the records of a journal of `fileSize` bytes with a valid header for `layout`,
    /// a block at a time. A record is bad if its checksum fails, or it is a chunk record whose
    /// index is not below the chunk count or names a chunk an earlier record named (Weft
    /// writes each once). The first bad record (or a partial one) and everything after it is
    /// cut: what a crash tore, or what was damaged since; the chunks it named are fetched
    /// again, and nothing before it depends on it. `record` sees each good chunk record, in order.
    static func scan(
        _ file: ContentFile, fileSize: Int, layout: ContentStore.Layout,
        record: (Int, ArraySlice<UInt8>) -> Void = { _, _ in }
    ) throws -> Scan {
        let wholeRecords = max(0, fileSize - headerByteCount) / recordByteCount
        let partialBytes = max(0, fileSize - headerByteCount) % recordByteCount
        var scan = Scan(
            verified: VerifiedChunks(chunkCount: layout.chunkCountValue), goodByteCount: headerByteCount,
            chunkRecordCount: 0, coveredCount: 0, uncovered: [], cutRecordCount: 0)
        let recordsPerBlock = 1638  // 65,520 bytes
        var number = 0
        while number < wholeRecords {
            let count = min(recordsPerBlock, wholeRecords - number)
            let blockStart = headerByteCount + number * recordByteCount
            let block = try file.read(count: count * recordByteCount, at: blockStart)
            for offset in stride(from: 0, to: block.count, by: recordByteCount) {
                let bytes = block[offset..<offset + recordByteCount]
                let body = bytes.prefix(recordByteCount - checksumByteCount)
                let field = bytes.bigEndian(UInt32.self, at: offset)
                let index = Int(field)
                let isGood: Bool
                if !checksum(body).elementsEqual(bytes.suffix(checksumByteCount)) {
                    isGood = false
                } else if field == syncMarkIndex {
                    let covered = Int(bytes.bigEndian(UInt32.self, at: offset + 4))
                    isGood = covered <= scan.chunkRecordCount
                    if isGood && covered > scan.coveredCount {
                        scan.coveredCount = covered
                        let firstUncovered = scan.chunkRecordCount - scan.uncovered.count
                        scan.uncovered.removeFirst(min(scan.uncovered.count, covered - firstUncovered))
                    }
                } else if index < layout.chunkCountValue, scan.verified.insert(index) {
                    isGood = true
                    scan.chunkRecordCount += 1
                    record(index, bytes.dropFirst(4).prefix(hashByteCount))
                    scan.uncovered.append(
                        UncoveredRecord(index: index, hash: bytes.dropFirst(4).prefix(hashByteCount), offset: blockStart + offset))
                } else {
                    isGood = false
                }
                guard isGood else {
                    scan.cutRecordCount = wholeRecords - number + (partialBytes > 0 ? 1 : 0)
                    return scan
                }
                number += 1
                scan.goodByteCount += recordByteCount
            }
        }
        scan.cutRecordCount = partialBytes > 0 ? 1 : 0
        return scan
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
