import Foundation
import WeftModel

// Retention through the download driver (SPEC.md §11.2 "Removing"): a content being removed
// first stops being fetched (its requests cancelled at the peers, its place given to what
// waits), then a job removes its files, then anything that wanted it meanwhile wants it
// afresh. The driver orders the removal against the wants that messages stored meanwhile
// send: a want that comes while the files go waits for the removal to end.

extension ContentDriver {
    /// The removals under way.
    struct Removals {
        /// Roots whose removal job runs.
        var inFlight: Set<ContentRoot> = []
        /// Wants of those roots that came meanwhile, to replay once it ends.
        var heldBack: [ContentRoot: (descriptor: ContentDescriptor, mimeType: String?)] = [:]
        /// Downloads stopped for a removal, started again if their content stays.
        var stopped: [ContentRoot: ContentDescriptor] = [:]

        /// Keeps a want of a content being removed for later; false if it is not being removed.
        mutating func holdBack(_ descriptor: ContentDescriptor, mimeType: String?) -> Bool {
            guard inFlight.contains(descriptor.root) else { return false }
            heldBack[descriptor.root] = (descriptor, mimeType)
            return true
        }
    }

    /// Stops fetching the removal's contents and starts the job that removes them. A content
    /// being opened is left for the next pass: the open, running on the pool, would make its
    /// files again after the removal.
    func remove(_ removal: ContentRemoval) {
        var targets: [ContentRoot] = []
        for root in removal.roots where !removals.inFlight.contains(root) {
            if let download = downloads[root] {
                guard download.phase != .opening else { continue }
                if download.phase == .transferring || download.phase == .completing { perform(core.handle(.cancelled(root))) }
                forgetAsked(root)
                downloads[root] = nil
                // Its partial content is not closed: the removal discards it (a close would
                // flush it), and if the content stays, the store hands the same one back.
                removals.stopped[root] = download.descriptor
            } else if waitingRoots.remove(root) != nil, let index = waiting.firstIndex(where: { $0.descriptor.root == root }) {
                removals.stopped[root] = waiting.remove(at: index).descriptor
            }
            targets.append(root)
        }
        guard !targets.isEmpty else {
            removal.answer(removed: [])
            return
        }
        removals.inFlight.formUnion(targets)
        service.removeInBackground(targets, for: removal)
        startWaiting()
    }

    /// The removal's job is done: what it removed is forgotten, downloads it stopped of content
    /// that stays start again, and wants that came meanwhile are taken.
    func finishRemoval(_ removal: ContentRemoval, targets: [ContentRoot], removed: [ContentRoot]) {
        let gone = Set(removed)
        for root in targets {
            removals.inFlight.remove(root)
            let stopped = removals.stopped.removeValue(forKey: root)
            if gone.contains(root) {
                service.forgetRemoved(root)
            } else if let stopped {
                want(stopped, mimeType: nil)
            }
            if let next = removals.heldBack.removeValue(forKey: root) { want(next.descriptor, mimeType: next.mimeType) }
        }
        removal.answer(removed: removed)
    }
}
