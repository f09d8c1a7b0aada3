import NIOCore
import WeftModel
import WeftTransfer

/// A content-transfer sync message (SPEC.md §17.8): how nodes ask each other what they hold of
/// a content, fetch its manifest and its chunks. Sent only to a node whose node info sets the
/// *content* feature bit (§3.3). Not replication: the node's content service takes them, never
/// the sync core.
///
/// Every list is bounded (`maxChunkListCount` indices, `ContentDescriptor.maxChunkCount` bits
/// of holdings), and a reader checks each count before it allocates anything.
public enum ContentTransferMessage: Hashable, Sendable {
    /// "Which chunks of this content do you hold?" Answered with HOLDINGS.
    case holdingsRequest(ContentRoot)
    /// The chunks of the content the sender holds verified; sent in answer, and unasked when
    /// it holds more (to a peer that asked before).
    case holdings(ContentRoot, ContentHoldings)
    /// "Send me this content's manifest." Answered with MANIFEST.
    case manifestRequest(ContentRoot)
    /// The content's manifest (§17.4), whose root is the message's; nil: not held.
    case manifest(ContentRoot, ContentManifest?)
    /// "Send me these chunks": 1 to `maxChunkListCount` indices, strictly ascending. Each is
    /// answered with CHUNK or NOT HELD (or nothing, once cancelled).
    case chunkRequest(ContentRoot, chunks: [UInt32])
    /// One chunk (§17.6). Sent plain, outside the connection's zstd stream: its frame is
    /// compressed already, or not worth compressing.
    case chunk(ChunkMessage)
    /// "I do not hold these chunks" (after all): an answer to CHUNK REQUEST.
    case notHeld(ContentRoot, chunks: [UInt32])
    /// "Do not send these chunks after all": requested, not yet received.
    case cancel(ContentRoot, chunks: [UInt32])

    /// Most chunk indices one CHUNK REQUEST, NOT HELD or CANCEL holds.
    public static let maxChunkListCount = 256
    /// Bytes of one index in a list.
    public static let chunkIndexByteCount = 4

    /// The type byte this message travels under.
    public var type: SyncMessageType {
        switch self {
        case .holdingsRequest: .holdingsRequest
        case .holdings: .holdings
        case .manifestRequest: .manifestRequest
        case .manifest: .manifest
        case .chunkRequest: .chunkRequest
        case .chunk: .chunk
        case .notHeld: .notHeld
        case .cancel: .cancel
        }
    }

    /// The content the message is about.
    public var root: ContentRoot {
        switch self {
        case .holdingsRequest(let root), .holdings(let root, _), .manifestRequest(let root), .manifest(let root, _),
            .chunkRequest(let root, _), .notHeld(let root, _), .cancel(let root, _):
            root
        case .chunk(let chunk): chunk.root
        }
    }
}

/// Which chunks of a content a node holds verified (HOLDINGS, §17.8).
public enum ContentHoldings: Hashable, Sendable {
    /// No chunk (nor, perhaps, the manifest).
    case none
    /// Every chunk: the content is complete.
    case all
    /// These chunks of a content of `chunkCount` chunks (1 to `ContentDescriptor.maxChunkCount`).
    case chunks(TransferChunkSet)

    /// Holding kinds on the wire.
    static let noneKind: UInt8 = 0
    static let allKind: UInt8 = 1
    static let chunksKind: UInt8 = 2
}

// MARK: - Writing

extension ContentTransferMessage {
    /// Checks what a writer must not send: lists of 0 or more than `maxChunkListCount`
    /// indices, not strictly ascending or past `ContentDescriptor.maxChunkCount`; holdings of
    /// 0 or more than `ContentDescriptor.maxChunkCount` chunks.
    func checkFits() throws(SyncMessageError) {
        switch self {
        case .holdings(_, .chunks(let set)):
            guard (1...ContentDescriptor.maxChunkCount).contains(set.chunkCount) else {
                throw .invalidBody(type, "holdings of \(set.chunkCount) chunks (1 to \(ContentDescriptor.maxChunkCount))")
            }
        case .chunkRequest(_, let chunks), .notHeld(_, let chunks), .cancel(_, let chunks):
            guard chunks.count <= Self.maxChunkListCount else { throw .listTooLong(type, chunks.count) }
            try Self.checkIndices(chunks, type: type)
        case .holdingsRequest, .holdings, .manifestRequest, .manifest, .chunk:
            break
        }
    }

    /// The body's length.
    var bodyByteCount: Int {
        switch self {
        case .holdingsRequest, .manifestRequest: ContentRoot.byteCount
        case .holdings(_, .chunks(let set)): ContentRoot.byteCount + 1 + 4 + (set.chunkCount + 7) / 8
        case .holdings: ContentRoot.byteCount + 1
        case .manifest(_, let manifest): ContentRoot.byteCount + 1 + (manifest?.wireByteCount ?? 0)
        case .chunkRequest(_, let chunks), .notHeld(_, let chunks), .cancel(_, let chunks):
            ContentRoot.byteCount + 2 + chunks.count * Self.chunkIndexByteCount
        case .chunk(let chunk): ChunkMessage.headerByteCount + chunk.frame.readableBytes
        }
    }

    /// Writes the body (after `checkFits()`).
    func writeBody(to buffer: inout ByteBuffer) {
        switch self {
        case .holdingsRequest(let root), .manifestRequest(let root):
            buffer.writeBytes(root.bytes)
        case .holdings(let root, let holdings):
            buffer.writeBytes(root.bytes)
            switch holdings {
            case .none: buffer.writeInteger(ContentHoldings.noneKind)
            case .all: buffer.writeInteger(ContentHoldings.allKind)
            case .chunks(let set):
                buffer.writeInteger(ContentHoldings.chunksKind)
                buffer.writeInteger(UInt32(set.chunkCount))
                var bitmap = [UInt8](repeating: 0, count: (set.chunkCount + 7) / 8)
                for chunk in set { bitmap[chunk >> 3] |= 1 << UInt8(chunk & 7) }
                buffer.writeBytes(bitmap)
            }
        case .manifest(let root, let manifest):
            buffer.writeBytes(root.bytes)
            if let manifest {
                buffer.writeInteger(UInt8(1))
                manifest.write(to: &buffer)
            } else {
                buffer.writeInteger(UInt8(0))
            }
        case .chunkRequest(let root, let chunks), .notHeld(let root, let chunks), .cancel(let root, let chunks):
            buffer.writeBytes(root.bytes)
            buffer.writeInteger(UInt16(clamping: chunks.count))
            for chunk in chunks { buffer.writeInteger(chunk) }
        case .chunk(let chunk):
            chunk.write(to: &buffer)
        }
    }

    private static func checkIndices(_ chunks: [UInt32], type: SyncMessageType) throws(SyncMessageError) {
        guard !chunks.isEmpty else { throw .invalidBody(type, "no chunks") }
        var previous: UInt32?
        for chunk in chunks {
            guard chunk < UInt32(ContentDescriptor.maxChunkCount) else {
                throw .invalidBody(type, "chunk \(chunk) is past the \(ContentDescriptor.maxChunkCount) a content may have")
            }
            if let previous, previous >= chunk { throw .invalidBody(type, "chunks not strictly ascending") }
            previous = chunk
        }
    }
}

// MARK: - Reading

extension ContentTransferMessage {
    /// Reads the body of a content-transfer message of `type` (all of `body`).
    init(type: SyncMessageType, body: ByteBuffer) throws(SyncMessageError) {
        var buffer = body
        func root() throws(SyncMessageError) -> ContentRoot {
            guard let bytes = buffer.readBytes(length: ContentRoot.byteCount), let root = ContentRoot(bytes: bytes) else {
                throw .truncated(type)
            }
            return root
        }
        func end() throws(SyncMessageError) {
            guard buffer.readableBytes == 0 else { throw .trailingBytes(type, buffer.readableBytes) }
        }
        switch type {
        case .holdingsRequest:
            self = .holdingsRequest(try root())
            try end()
        case .manifestRequest:
            self = .manifestRequest(try root())
            try end()
        case .holdings:
            let root = try root()
            guard let kind = buffer.readInteger(as: UInt8.self) else { throw .truncated(type) }
            switch kind {
            case ContentHoldings.noneKind:
                try end()
                self = .holdings(root, .none)
            case ContentHoldings.allKind:
                try end()
                self = .holdings(root, .all)
            case ContentHoldings.chunksKind:
                guard let count = buffer.readInteger(as: UInt32.self) else { throw .truncated(type) }
                // The bound first, whatever follows: nothing is allocated for more.
                guard count >= 1, count <= UInt32(ContentDescriptor.maxChunkCount) else {
                    throw .invalidBody(type, "holdings of \(count) chunks (1 to \(ContentDescriptor.maxChunkCount))")
                }
                let chunkCount = Int(count)
                let byteCount = (chunkCount + 7) / 8
                guard buffer.readableBytes >= byteCount else { throw .truncated(type) }
                guard buffer.readableBytes == byteCount else { throw .trailingBytes(type, buffer.readableBytes - byteCount) }
                var set = TransferChunkSet(chunkCount: chunkCount)
                var failure: SyncMessageError?
                buffer.withUnsafeReadableBytes { bitmap in
                    for (offset, byte) in bitmap.enumerated() where byte != 0 {
                        for bit in 0..<8 where byte & (1 << UInt8(bit)) != 0 {
                            let chunk = offset * 8 + bit
                            guard chunk < chunkCount else {
                                failure = .invalidBody(type, "a bit set for chunk \(chunk), past the content's \(chunkCount)")
                                return
                            }
                            set.insert(chunk)
                        }
                    }
                }
                if let failure { throw failure }
                self = .holdings(root, .chunks(set))
            default:
                throw .invalidBody(type, "holdings of kind \(kind) (0 none, 1 all, 2 a bitset)")
            }
        case .manifest:
            let root = try root()
            guard let held = buffer.readInteger(as: UInt8.self) else { throw .truncated(type) }
            switch held {
            case 0:
                try end()
                self = .manifest(root, nil)
            case 1:
                let manifest: ContentManifest
                do {
                    manifest = try ContentManifest(wire: buffer)
                } catch {
                    throw .invalidBody(type, "\(error)")
                }
                guard manifest.root == root else {
                    throw .invalidBody(type, "the manifest of content \(manifest.root.hex) answers for content \(root.hex)")
                }
                self = .manifest(root, manifest)
            default:
                throw .invalidBody(type, "held \(held) (0 or 1)")
            }
        case .chunkRequest, .notHeld, .cancel:
            let root = try root()
            guard let count = buffer.readInteger(as: UInt16.self) else { throw .truncated(type) }
            // The bound first, whatever follows: a longer list is malformed, not short.
            guard Int(count) <= Self.maxChunkListCount else {
                throw .invalidBody(type, "\(count) chunks (at most \(Self.maxChunkListCount))")
            }
            guard Int(count) * Self.chunkIndexByteCount <= buffer.readableBytes else { throw .truncated(type) }
            var chunks: [UInt32] = []
            chunks.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let chunk = buffer.readInteger(as: UInt32.self) else { throw .truncated(type) }
                chunks.append(chunk)
            }
            try end()
            try Self.checkIndices(chunks, type: type)
            switch type {
            case .chunkRequest: self = .chunkRequest(root, chunks: chunks)
            case .notHeld: self = .notHeld(root, chunks: chunks)
            default: self = .cancel(root, chunks: chunks)
            }
        case .chunk:
            do {
                self = .chunk(try ChunkMessage(wire: buffer))
            } catch {
                throw .truncated(type)
            }
        case .have, .want, .operations, .stored, .ihave, .prune, .summary, .compressed, .names:
            throw .invalidBody(type, "not a content-transfer message")
        }
    }
}
