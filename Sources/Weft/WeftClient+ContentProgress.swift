import WeftModel

/// A part of a message: the message, and the part's index from 0.
public struct MessagePartReference: Hashable, Sendable {
    /// The message.
    public var message: OperationID
    /// The part's place among the message's parts, from 0.
    public var index: Int

    public init(message: OperationID, index: Int) {
        self.message = message
        self.index = index
    }
}

// The content parts of messages (SPEC.md §17), as the node holds, fetches and sends them:
// their progress, and fetching them on demand. Through `contentTransfers`.
extension WeftClient {
    /// The progress of part `index` of `message` on this node: of its download, or, for the
    /// local user's own content added on this node, of its upload (bytes sent to peers at
    /// least once). Ends once the part is whole here (and, for an upload, sent whole), with a
    /// last value of fraction exactly 1; an inline part is whole at once. See
    /// `ContentProgressSequence`.
    public func contentProgress(ofPart index: Int, in message: OperationID) async throws(WeftError) -> ContentProgressSequence {
        try await contentProgress(of: [MessagePartReference(message: message, index: index)])
    }

    /// The progress of several parts together, weighted by size: each value's bytes are the
    /// sums of the parts' (its fraction is their verified bytes over their total). Ends once
    /// every part is whole here, with a last value of fraction exactly 1.
    public func contentProgress(of parts: [MessagePartReference]) async throws(WeftError) -> ContentProgressSequence {
        var found: [ContentProgressSequence.Part] = []
        for reference in parts {
            let part = try await self.part(reference)
            found.append(ContentProgressSequence.Part(byteCount: part.byteCount, content: part.content))
        }
        if contentTransfers == nil, found.contains(where: { $0.content != nil }) {
            throw .contentUnavailable("this client follows no node's rich content")
        }
        return ContentProgressSequence(parts: found, transfers: contentTransfers)
    }

    /// Fetches the content of part `index` of `message` (on demand: a part the node does not
    /// fetch by itself, see `ContentConfiguration`). Returns once that is asked for; the node
    /// fetches it while it runs, also after a restart. Follow it with
    /// `contentProgress(ofPart:in:)`. An inline part, or one held whole, needs nothing.
    public func downloadContent(ofPart index: Int, in message: OperationID) async throws(WeftError) {
        let part = try await self.part(MessagePartReference(message: message, index: index))
        guard let descriptor = part.content else { return }
        guard let contentTransfers else { throw .contentUnavailable("this client follows no node's rich content") }
        await contentTransfers.download(descriptor, mimeType: part.mimeType)
    }

    private func part(_ reference: MessagePartReference) async throws(WeftError) -> MessagePart {
        guard let found = try await message(reference.message) else { throw .unknownMessage(reference.message.hex) }
        guard found.parts.indices.contains(reference.index) else {
            throw .unknownMessage("\(reference.message.hex) part \(reference.index) (it has \(found.parts.count) parts, from 0)")
        }
        return found.parts[reference.index]
    }
}
