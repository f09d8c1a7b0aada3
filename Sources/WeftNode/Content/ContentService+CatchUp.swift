import WeftModel
import WeftStore

// What the content service does when it starts, before anything asks it for more: the content
// store is brought in line with the messages held, since the node may have stopped with
// downloads queued, or been down while retention ran out.

extension ContentService {
    /// Roots read from the store at a time when wanting what messages refer to.
    static let catchUpPage = 256

    /// Removes content no held message refers to (so that none of it is resumed), resumes the
    /// partial contents, then wants what held messages refer to and the node lacks.
    func catchUp() async {
        await removeUnreferenced()
        await resumePartials()
        await wantReferencedContent()
    }

    /// Wants every content that a held message refers to, that the configuration says to
    /// fetch (`shouldFetch`) and of which the node holds nothing: those wanted beyond the
    /// scheduler's bound when the node stopped (queued, not yet opened, so no partial file
    /// says to resume them). Partial contents are `resumePartials`'s, complete ones need
    /// nothing. Read a page of roots at a time, so a store of many contents is never read whole.
    func wantReferencedContent() async {
        var after: ContentRoot?
        var wanted = 0
        do {
            while true {
                let page = try await store.fetchContentReferences(after: after, limit: Self.catchUpPage)
                guard let last = page.last else { break }
                after = last.root
                let absent = try await blocking {
                    try page.filter { self.contentStore.holding(try ContentStore.Root($0.root.bytes)) == .absent }
                }
                for reference in absent {
                    // The first part that the configuration fetches: one want a content.
                    for use in reference.uses where await shouldFetch(use.descriptor, mimeType: use.mimeType, in: use.conversation) {
                        guard await events.send(.want(use.descriptor, mimeType: use.mimeType)) else { return }
                        wanted += 1
                        break
                    }
                }
            }
        } catch is CancellationError {
            return
        } catch {
            logger.error("cannot list the content that stored messages refer to: \(error)")
        }
        if wanted > 0 { logger.info("fetching \(wanted) content(s) of stored messages not held yet") }
    }
}
