import DequeModule
import NIOCore
import Synchronization
import WeftCrypto
import WeftModel
import WeftSync

/// A connection with a peer whose node info sets the *content* bit, as the content service
/// uses it: bytes for it go to its outbox only.
struct ContentLink: Sendable {
    let identity: PublicIdentity
    let number: ConnectionNumber
    /// The connection's two lanes: MANIFEST and CHUNK go on the bulk lane.
    let outbox: PeerOutbox
    /// Queues a message on the sync lane (telling the sync core when the queue passes its
    /// high mark, as any replication message does).
    let send: @Sendable (ByteBuffer) async -> Void
    /// Closes the connection with ERROR 6 (malformed sync message) and the reason.
    let fail: @Sendable (String) -> Void
}

/// What a peer asked this node to send over one connection, waiting for the connection's
/// server (`ContentService.serve`): HOLDINGS answers, manifests, chunks; and the contents it
/// asked about that it is told of again when this node holds more (SPEC.md §17.8).
///
/// Bounded per peer identity (`ContentServeBudget`, over all its connections): chunks and
/// manifests asked and not yet sent; past the bound a request is dropped. HOLDINGS answers:
/// one per content, at most `maxHoldings`.
final class ContentServeQueue: Sendable {
    enum Job: Sendable, Hashable {
        case holdings(ContentRoot)
        case manifest(ContentRoot)
        case chunk(ContentRoot, UInt32)
    }

    private struct State: ~Copyable {
        var holdings = Deque<ContentRoot>()
        var manifests = Deque<ContentRoot>()
        var chunks = Deque<(root: ContentRoot, index: UInt32)>()
        /// Contents the peer asked about and was told less than all of, oldest first.
        var interests = Deque<ContentRoot>()
        var closed = false
        var waiting: CheckedContinuation<Job?, Never>?
    }

    let link: ContentLink
    private let budget: ContentServeBudget
    private let maxHoldings: Int
    private let maxInterests: Int
    private let state = Mutex(State())

    init(link: ContentLink, budget: ContentServeBudget, maxHoldings: Int, maxInterests: Int) {
        self.link = link
        self.budget = budget
        self.maxHoldings = maxHoldings
        self.maxInterests = maxInterests
    }

    // MARK: - Requests

    /// Queues a HOLDINGS answer for `root` (once: a second ask while one waits adds nothing).
    /// False if past the bound (dropped).
    @discardableResult
    func askHoldings(_ root: ContentRoot) -> Bool {
        add { state in
            if state.holdings.contains(root) { return true }
            guard state.holdings.count < maxHoldings else { return false }
            state.holdings.append(root)
            return true
        }
    }

    /// Queues a manifest. False if the peer has as many waiting as it may (dropped).
    @discardableResult
    func askManifest(_ root: ContentRoot) -> Bool {
        add { state in
            guard budget.take(manifests: 1, of: link.identity) else { return false }
            state.manifests.append(root)
            return true
        }
    }

    /// Queues chunks; returns how many were dropped past the peer's bound.
    @discardableResult
    func askChunks(_ indices: [UInt32], of root: ContentRoot) -> Int {
        var dropped = 0
        _ = add { state in
            for index in indices {
                if budget.take(chunks: 1, of: link.identity) {
                    state.chunks.append((root, index))
                } else {
                    dropped += 1
                }
            }
            return true
        }
        return dropped
    }

    /// Drops chunks asked and not yet taken by the server.
    func cancel(_ indices: [UInt32], of root: ContentRoot) {
        let cancelled = state.withLock { state -> Int in
            let wanted = Set(indices)
            let before = state.chunks.count
            state.chunks.removeAll { $0.root == root && wanted.contains($0.index) }
            return before - state.chunks.count
        }
        budget.give(chunks: cancelled, of: link.identity)
    }

    private func add(_ change: (inout State) -> Bool) -> Bool {
        let (added, handOff) = state.withLock { state -> (Bool, (CheckedContinuation<Job?, Never>, Job)?) in
            guard !state.closed else { return (false, nil) }
            let added = change(&state)
            guard let waiting = state.waiting, let job = Self.take(&state) else { return (added, nil) }
            state.waiting = nil
            return (added, (waiting, job))
        }
        if let (waiting, job) = handOff { waiting.resume(returning: job) }
        return added
    }

    // MARK: - Interests

    /// Remembers that the peer asked about `root` and holds less than all of it here.
    func remember(_ root: ContentRoot) {
        state.withLock { state in
            if let index = state.interests.firstIndex(of: root) { state.interests.remove(at: index) }
            state.interests.append(root)
            if state.interests.count > maxInterests { state.interests.removeFirst() }
        }
    }

    /// This node holds more of `root`: if the peer asked about it, it is told again (and
    /// forgotten once told all).
    func holdMore(of root: ContentRoot, isComplete: Bool) {
        let asked = state.withLock { state -> Bool in
            guard let index = state.interests.firstIndex(of: root) else { return false }
            if isComplete { state.interests.remove(at: index) }
            return true
        }
        if asked { askHoldings(root) }
    }

    // MARK: - The server's side

    /// The next job, HOLDINGS first, then manifests, then chunks; waiting for one; nil once
    /// closed.
    func next() async -> Job? {
        await withCheckedContinuation { continuation in
            let job = state.withLock { state -> Job?? in
                if let job = Self.take(&state) { return .some(job) }
                if state.closed { return .some(nil) }
                state.waiting = continuation
                return nil
            }
            if let job { continuation.resume(returning: job) }
        }
    }

    private static func take(_ state: inout State) -> Job? {
        if let root = state.holdings.popFirst() { return .holdings(root) }
        if let root = state.manifests.popFirst() { return .manifest(root) }
        if let chunk = state.chunks.popFirst() { return .chunk(chunk.root, chunk.index) }
        return nil
    }

    /// The server is done with `job` (sent, answered NOT HELD, or given up): its place in the
    /// peer's bound is free again.
    func done(_ job: Job) {
        switch job {
        case .holdings: break
        case .manifest: budget.give(manifests: 1, of: link.identity)
        case .chunk: budget.give(chunks: 1, of: link.identity)
        }
    }

    /// Drops everything queued and ends the server (the connection ended).
    func close() {
        let (waiting, chunks, manifests) = state.withLock { state in
            state.closed = true
            defer {
                state.waiting = nil
                state.holdings.removeAll()
                state.manifests.removeAll()
                state.chunks.removeAll()
                state.interests.removeAll()
            }
            return (state.waiting, state.chunks.count, state.manifests.count)
        }
        budget.give(chunks: chunks, of: link.identity)
        budget.give(manifests: manifests, of: link.identity)
        waiting?.resume(returning: nil)
    }
}

/// What each peer identity has asked this node to send and is not yet sent, over all its
/// connections: chunks and manifests, each bounded.
final class ContentServeBudget: Sendable {
    private let counts = Mutex<[PublicIdentity: (chunks: Int, manifests: Int)]>([:])
    let maxChunks: Int
    let maxManifests: Int

    init(maxChunks: Int, maxManifests: Int) {
        self.maxChunks = maxChunks
        self.maxManifests = maxManifests
    }

    /// Takes room for chunks or manifests; false (nothing taken) past the bound.
    func take(chunks: Int = 0, manifests: Int = 0, of peer: PublicIdentity) -> Bool {
        counts.withLock { counts in
            let held = counts[peer] ?? (0, 0)
            guard held.chunks + chunks <= maxChunks, held.manifests + manifests <= maxManifests else { return false }
            counts[peer] = (held.chunks + chunks, held.manifests + manifests)
            return true
        }
    }

    func give(chunks: Int = 0, manifests: Int = 0, of peer: PublicIdentity) {
        guard chunks > 0 || manifests > 0 else { return }
        counts.withLock { counts in
            guard let held = counts[peer] else { return }
            let left = (max(0, held.chunks - chunks), max(0, held.manifests - manifests))
            counts[peer] = left == (0, 0) ? nil : left
        }
    }

    /// What the peer has waiting (for tests and figures).
    func held(by peer: PublicIdentity) -> (chunks: Int, manifests: Int) { counts.withLock { $0[peer] ?? (0, 0) } }
}
