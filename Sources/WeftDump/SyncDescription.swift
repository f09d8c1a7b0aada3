import NIOCore
import WeftCompression
import WeftModel
import WeftSync
import WeftTransfer

/// The fields a dump shows of a sync message (SPEC.md §14, §17.8), decoded by WeftSync's own
/// decoders. Chunks are checked against a manifest when the capture carried it (`manifests`).
struct SyncDescription {
    /// Manifests seen in the capture, by content root (bounded: cleared when full).
    private var manifests: [ContentRoot: ContentManifest] = [:]
    private let chunkDecoder = ChunkFrameDecoder()
    static let maxManifests = 1_024

    mutating func fields(of message: SyncMessage) -> [DumpField] {
        var fields = [DumpField("message", .string(message.type.description))]
        switch message {
        case .have(let have):
            fields.append(DumpField("ranges", .integer(Int64(have.ranges.count))))
        case .summary(let summary):
            fields += [DumpField("final", .bool(summary.isFinal)), DumpField("logs", .integer(Int64(summary.entries.count)))]
        case .want(let want):
            fields += [
                DumpField("graft", .bool(want.isGraft)),
                DumpField("conversations", .list(want.entries.map { .string($0.conversation.hex) })),
            ]
        case .operations(let operations):
            fields += [
                DumpField("push", .bool(operations.isPush)),
                DumpField("operations", .list(operations.operations.map { .object(Self.fields(of: $0)) })),
            ]
        case .stored(let ranges):
            fields.append(DumpField("slotRanges", .integer(Int64(ranges.count))))
        case .ihave(let announcements):
            fields.append(DumpField("ids", .list(announcements.map { .string($0.id.hex) })))
        case .prune:
            break
        case .names(let names):
            fields.append(DumpField("names", .list(names.map { .object([DumpField("user", .string("\($0.user)")), DumpField("name", .string($0.displayName))]) })))
        case .content(let content):
            fields += self.fields(of: content)
        }
        return fields
    }

    /// An operation: identifier, author, conversation, sequence, kind, timestamp, causes, and
    /// whether its signature verifies.
    static func fields(of operation: SignedOperation) -> [DumpField] {
        let body = operation.operation
        return [
            DumpField("id", .string(operation.id.hex)), DumpField("author", .string("\(body.author)")),
            DumpField("conversation", .string(body.conversation.hex)), DumpField("sequence", .unsigned(body.sequence)),
            DumpField("kind", .string(Self.kindName(body.body))), DumpField("timestamp", .unsigned(body.timestamp.rawValue)),
            DumpField("causes", .list(body.causes.map { .string($0.hex) })), DumpField("signatureValid", .bool(operation.hasValidSignature)),
        ]
    }

    /// §12.3's name of an operation kind.
    static func kindName(_ body: OperationBody) -> String {
        switch body {
        case .createConversation: "createConversation"
        case .addParticipants: "addParticipants"
        case .removeParticipants: "removeParticipants"
        case .setMetadata: "setMetadata"
        case .postMessage: body.kind == 10 ? "postMessageWithContent" : "postMessage"
        case .delivered: "delivered"
        case .read: "read"
        case .markAllRead: "markAllRead"
        case .deleteMessage: "deleteMessage"
        }
    }

    private mutating func fields(of message: ContentTransferMessage) -> [DumpField] {
        switch message {
        case .holdingsRequest(let root), .manifestRequest(let root):
            return [DumpField("root", .string(root.hex))]
        case .holdings(let root, _):
            return [DumpField("root", .string(root.hex))]
        case .manifest(let root, let manifest):
            if let manifest {
                if manifests.count >= Self.maxManifests { manifests.removeAll() }
                manifests[root] = manifest
            }
            return [
                DumpField("root", .string(root.hex)), DumpField("held", .bool(manifest != nil)),
                DumpField("chunks", .integer(Int64(manifest?.descriptor.chunkCount ?? 0))),
            ]
        case .chunkRequest(let root, let chunks), .notHeld(let root, let chunks), .cancel(let root, let chunks):
            return [DumpField("root", .string(root.hex)), DumpField("chunks", .list(chunks.map { .unsigned(UInt64($0)) }))]
        case .chunk(let chunk):
            let flags = chunk.frame.getInteger(at: chunk.frame.readerIndex, as: UInt8.self) ?? 0
            var fields = [
                DumpField("root", .string(chunk.root.hex)), DumpField("index", .unsigned(UInt64(chunk.index))),
                DumpField("compressed", .bool(flags & ChunkFrame.compressedFlag != 0)),
                DumpField("frameSize", .integer(Int64(chunk.frame.readableBytes))),
            ]
            guard let manifest = manifests[chunk.root] else {
                // Without the manifest the size is what the frame says: a raw payload's length,
                // or the size a zstd frame declares (unchecked).
                let payload = chunk.frame.readableBytesView.dropFirst()
                let size = flags & ChunkFrame.compressedFlag == 0
                    ? UInt64(payload.count) : payload.withContiguousStorageIfAvailable { ZstdFrameHeader.declaredContentSize(UnsafeRawBufferPointer($0)) } ?? nil
                if let size { fields.append(DumpField("declaredSize", .unsigned(size))) }
                fields.append(DumpField("hashCheck", .string("no manifest in the capture")))
                return fields
            }
            do {
                let size = try chunkDecoder.withChunk(chunk.frame, index: Int(chunk.index), manifest: manifest) { $0.count }
                fields += [DumpField("size", .integer(Int64(size))), DumpField("hashCheck", .string("ok"))]
            } catch {
                fields.append(DumpField("hashCheck", .string("failed: \(error)")))
            }
            return fields
        }
    }
}
