import Foundation
import Synchronization
import WeftModel
import WeftStore

// Retention of content (SPEC.md §11.2 "Removing", §13.8): content follows its messages. A
// content that no held message refers to any more (the relayed conversations it came with
// were pruned, the pending messages naming it expired) is removed, complete or partial, with
// its manifest. Content added here and not sent yet is kept while it is fresh
// (`ContentConfiguration.unreferencedGracePeriod`), so the message that sends it finds it.

extension ContentService {
    /// Removes every content no message the store holds refers to and whose files have not
    /// changed for the grace period; stops its download if one is under way. The replicator
    /// calls it after each pruning pass, and the service when it starts: only while the
    /// service runs (its download driver does the removing). Returns how many contents it
    /// removed (0 if another pass runs).
    @discardableResult
    func removeUnreferenced() async -> Int {
        guard isRemoving.withLock({ running in defer { running = true }; return !running }) else { return 0 }
        defer { isRemoving.withLock { $0 = false } }
        let grace = configuration.unreferencedGracePeriod
        do {
            let held = try await blocking { try self.contentStore.heldRoots() }
            let roots = held.compactMap { ContentRoot(bytes: $0.bytes) }.sorted()
            var removed = 0
            for start in stride(from: 0, to: roots.count, by: Store.maxContentReferencePage) {
                let page = Array(roots[start..<min(roots.count, start + Store.maxContentReferencePage)])
                let referenced = try await store.fetchReferencedContent(among: page)
                let cutoff = Date.now.addingTimeInterval(-Self.seconds(grace))
                // Content changed lately stays without stopping anything: chunks arriving, an
                // import waiting for its message. So does one whose times cannot be read.
                let stale = try await blocking {
                    page.filter { root in
                        guard !referenced.contains(root), let held = try? ContentStore.Root(root.bytes),
                            let changed = try? self.contentStore.lastChange(of: held)
                        else { return false }
                        return changed < cutoff
                    }
                }
                guard !stale.isEmpty else { continue }
                let removal = ContentRemoval(roots: stale, cutoff: cutoff)
                guard await events.send(.remove(removal)) else { return removed }
                removed += await removal.removed().count
            }
            if removed > 0 { logger.info("removed \(removed) content(s) that no held message refers to any more") }
            return removed
        } catch is CancellationError {
            return 0
        } catch {
            logger.error("cannot remove content that no held message refers to: \(error)")
            return 0
        }
    }

    /// The driver's job for a removal: looks at the database again (a message stored since
    /// the pass looked may refer to a content now; one stored after this look sends its want
    /// after it, which the driver holds back until the removal ends), removes the contents
    /// still unreferenced and unchanged, and reports to the driver.
    func removeInBackground(_ roots: [ContentRoot], for removal: ContentRemoval) {
        let spawned = spawn.yield {
            let removed = await self.removeNow(roots, cutoff: removal.cutoff)
            if !(await self.events.send(.removed(removal, targets: roots, removed: removed))) { removal.answer(removed: removed) }
        }
        if case .terminated = spawned { removal.answer(removed: []) }
    }

    private func removeNow(_ roots: [ContentRoot], cutoff: Date) async -> [ContentRoot] {
        let referenced: Set<ContentRoot>
        do {
            referenced = try await store.fetchReferencedContent(among: roots)
        } catch {
            logger.error("cannot tell which content messages refer to; removing none: \(error)")
            return []
        }
        let unreferenced = roots.filter { !referenced.contains($0) }
        do {
            return try await blocking {
                var removed: [ContentRoot] = []
                for root in unreferenced {
                    do {
                        if try self.contentStore.removeUnlessChanged(ContentStore.Root(root.bytes), since: cutoff) == .removed {
                            removed.append(root)
                        }
                    } catch {
                        self.logger.error("cannot remove content \(root): \(error)")
                    }
                }
                return removed
            }
        } catch {
            return []  // the node stops: the pool runs nothing more
        }
    }

    /// Forgets what the service said of a removed content: its status is read from the disk
    /// again, and whoever followed its progress is told it ended.
    func forgetRemoved(_ root: ContentRoot) {
        board.removed(root)
        pendingUploads.forget(root)
        descriptors.withLock { _ = $0.removeValue(forKey: root) }
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        TimeInterval(duration.components.seconds) + TimeInterval(duration.components.attoseconds) / 1e18
    }
}

/// One removal asked of the download driver (retention): the contents, the cutoff, and the
/// answer, given exactly once (by the driver, or by its queue when the service stops first).
final class ContentRemoval: Sendable {
    let roots: [ContentRoot]
    /// A content with a file changed at or after this stays.
    let cutoff: Date
    private let state = Mutex(State.waiting(nil))

    private enum State {
        case waiting(CheckedContinuation<[ContentRoot], Never>?)
        case answered([ContentRoot])
    }

    init(roots: [ContentRoot], cutoff: Date) {
        self.roots = roots
        self.cutoff = cutoff
    }

    /// The contents removed, once the removal is over.
    func removed() async -> [ContentRoot] {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> [ContentRoot]? in
                if case .answered(let removed) = state { return removed }
                state = .waiting(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Gives the answer: what was removed (the first answer counts; later ones are ignored).
    func answer(removed: [ContentRoot]) {
        let waiting = state.withLock { state -> CheckedContinuation<[ContentRoot], Never>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .answered(removed)
            return continuation
        }
        waiting?.resume(returning: removed)
    }
}
