import Foundation
import Synchronization
import WeftCrypto

/// The chunk frames a node keeps of a content (SPEC.md §11.2, `ROOT.frames`): each chunk's frame
/// as it travels (§17.5), so that a node serving a chunk sends the frame it made or received
/// and never compresses a chunk again. Only the node that adds content compresses it.
///
/// A cache beside the content, never synced: each entry carries a checksum over its frame, and
/// an entry that does not check (a crash tore it) or is empty says nothing, so the server falls
/// back to encoding the chunk from the content's bytes. A frame is written before its entry.
///
/// Header (47 bytes): magic `"WEFTCF"` (6) || version 1 (1) || root (32) || chunk count u32 ||
/// BLAKE2b-32 of the 43 bytes before it. Then one 16-byte entry a chunk, in index order:
/// offset u64 || length u32 || BLAKE2b-32 of (offset || length || the frame's bytes). An entry
/// of zeros: nothing kept. Length 0 (offset 0): the chunk travels raw, its frame is flag 0 and
/// the chunk's bytes from the content. Otherwise the frame is `length` bytes at `offset`,
/// after the entries.
public final class ContentFrames: Sendable {
    static let magic: [UInt8] = Array("WEFTCF".utf8)
    static let version: UInt8 = 1
    static let headerByteCount = 47
    static let entryByteCount = 16

    /// A chunk's frame as kept.
    public enum Kept: Sendable, Equatable {
        /// The chunk travels raw: its frame is the flag byte 0 and the chunk's bytes.
        case raw
        /// The whole frame (flags and payload) of a chunk that travels compressed.
        case frame([UInt8])
    }

    let file: ContentFile
    /// How many chunks the content has.
    public let chunkCount: Int
    /// Where the next frame goes.
    private let end: Mutex<Int>

    private init(file: ContentFile, chunkCount: Int, end: Int) {
        self.file = file
        self.chunkCount = chunkCount
        self.end = Mutex(end)
    }

    /// Opens the frames of `root` at `path`, creating the file (mode 0600) if it is missing
    /// and `create`; a file whose header is not one for this root and chunk count is started
    /// afresh (it is only a cache). Nil if it is missing and not to be created.
    static func open(_ path: String, root: ContentStore.Root, chunkCount: Int, create: Bool) throws -> ContentFrames? {
        guard let file = try ContentFile.open(path, create: create) else { return nil }
        let header = header(root: root, chunkCount: chunkCount)
        let indexEnd = headerByteCount + chunkCount * entryByteCount
        let size = try file.size()
        let heldHeader = size >= indexEnd ? try file.read(count: headerByteCount, at: 0) : []
        if heldHeader != header {
            try file.truncate(to: 0)
            try file.write(header, at: 0)
            try file.truncate(to: indexEnd)
            return ContentFrames(file: file, chunkCount: chunkCount, end: indexEnd)
        }
        return ContentFrames(file: file, chunkCount: chunkCount, end: size)
    }

    static func header(root: ContentStore.Root, chunkCount: Int) -> [UInt8] {
        var bytes = magic
        bytes.append(version)
        bytes += root.bytes
        bytes.appendBigEndian(UInt32(clamping: chunkCount))
        bytes += BLAKE2b.hash(bytes, outputByteCount: 4)
        return bytes
    }

    private static func check(offset: UInt64, length: UInt32, frame: UnsafeRawBufferPointer) -> [UInt8] {
        let hasher = BLAKE2b.Hasher(outputByteCount: 4)
        var fields: [UInt8] = []
        fields.appendBigEndian(offset)
        fields.appendBigEndian(length)
        hasher.update(fields)
        hasher.update(rawBytes: frame)
        return hasher.finalize()
    }

    private func entryOffset(_ index: Int) -> Int { Self.headerByteCount + index * Self.entryByteCount }

    // MARK: - Keeping

    /// Keeps chunk `index`'s frame (flags and payload, as §17.5 has it): a raw one as an entry
    /// alone, a compressed one appended and then named by its entry. Throws `.chunkOutOfRange`
    /// for an index past the content, and file errors (the caller may ignore them: a frame not
    /// kept is made again when served).
    public func keep(_ frame: UnsafeRawBufferPointer, of index: Int) throws {
        guard index >= 0, index < chunkCount else {
            throw ContentStoreError(.chunkOutOfRange, "Chunk \(index) is not among the \(chunkCount) of the content's frames.")
        }
        guard let flags = frame.first, flags != 0 else {
            try writeEntry(offset: 0, length: 0, frame: UnsafeRawBufferPointer(start: nil, count: 0), of: index)
            return
        }
        let offset = end.withLock { end in
            defer { end += frame.count }
            return end
        }
        try file.write(frame, at: offset)
        try writeEntry(offset: UInt64(offset), length: UInt32(frame.count), frame: frame, of: index)
    }

    private func writeEntry(offset: UInt64, length: UInt32, frame: UnsafeRawBufferPointer, of index: Int) throws {
        var entry: [UInt8] = []
        entry.reserveCapacity(Self.entryByteCount)
        entry.appendBigEndian(offset)
        entry.appendBigEndian(length)
        entry += Self.check(offset: offset, length: length, frame: frame)
        try file.write(entry, at: entryOffset(index))
    }

    // MARK: - Reading

    /// Chunk `index`'s frame, if one is kept and checks; nil otherwise (or for an index past
    /// the content).
    public func kept(_ index: Int) throws -> Kept? {
        guard index >= 0, index < chunkCount else { return nil }
        let entry = try file.read(count: Self.entryByteCount, at: entryOffset(index))[...]
        let offset = entry.bigEndian(UInt64.self, at: 0)
        let length = entry.bigEndian(UInt32.self, at: 8)
        let checksum = entry.suffix(4)
        if offset == 0 && length == 0 {
            let expected = Self.check(offset: 0, length: 0, frame: UnsafeRawBufferPointer(start: nil, count: 0))
            return checksum.elementsEqual(expected) ? .raw : nil
        }
        let indexEnd = UInt64(entryOffset(chunkCount))
        guard offset >= indexEnd, length > 0, length <= UInt32(ContentStore.maxReadByteCount) + 64,
            offset + UInt64(length) <= UInt64(try file.size())
        else { return nil }
        let frame = try file.read(count: Int(length), at: Int(offset))
        let expected = frame.withUnsafeBytes { Self.check(offset: offset, length: length, frame: $0) }
        return checksum.elementsEqual(expected) ? .frame(frame) : nil
    }
}
