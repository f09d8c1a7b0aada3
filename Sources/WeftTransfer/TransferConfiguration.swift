/// The transfer scheduler's bounds and timings (SPEC.md, "Rich content transfer: scheduling").
/// They are local choices, not protocol: two nodes with different values still interoperate.
public struct TransferConfiguration: Sendable, Hashable {
    /// Chunk requests a newly connected peer may have unanswered at once.
    public var initialWindow = 4
    /// The window never shrinks below this, nor grows past `maxWindow`: each chunk a peer
    /// answers verified widens its window by one, each tick in which its requests time out
    /// halves it.
    public var minWindow = 1
    public var maxWindow = 8
    /// Chunk requests unanswered at once over every peer and every content (endgame copies
    /// included).
    public var maxRequestsInFlight = 64
    /// A request not answered within this time is cancelled and given to another peer.
    public var requestTimeoutMilliseconds: UInt64 = 15_000
    /// Endgame: when every chunk a content still lacks is requested and at most this many
    /// are left, each is asked of a second peer as well (0: no endgame).
    public var endgameThreshold = 8
    /// Copies of one chunk in flight at once in the endgame, at most.
    public var endgameCopies = 2
    /// A peer that sends this many chunks that fail verification (over one connection) is
    /// penalized: the core asks it for nothing more and tells the driver to close it.
    public var maxBadChunksPerPeer = 3
    /// One chunk is asked again of a peer that sent it corrupt at most until it has sent it
    /// corrupt this many times.
    public var maxBadCopiesPerPeerPerChunk = 2
    /// Downloads under way at once; more are refused (`.failed(_, .tooManyDownloads)`).
    public var maxDownloads = 64
    /// Chunks of one content, at most (a content's bitset costs a bit a chunk per holder).
    public var maxChunkCount = 1 << 20
    /// Connected peers tracked, at most; more are ignored until some disconnect.
    public var maxPeers = 256
    /// Penalized peers remembered (not asked again when they reconnect), the latest ones.
    public var maxPenalizedPeers = 1_024

    public init() {}

    /// Whether the values are usable together (the core's initializer requires it).
    public var isValid: Bool {
        minWindow >= 1 && minWindow <= initialWindow && initialWindow <= maxWindow && maxRequestsInFlight >= 1
            && requestTimeoutMilliseconds >= 1 && endgameThreshold >= 0 && endgameCopies >= 1 && maxBadChunksPerPeer >= 1
            && maxBadCopiesPerPeerPerChunk >= 1 && maxDownloads >= 1 && maxChunkCount >= 1 && maxPeers >= 1
            && maxPenalizedPeers >= 0
    }
}
