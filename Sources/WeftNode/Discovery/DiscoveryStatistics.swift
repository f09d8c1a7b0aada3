import Synchronization

/// Discovery's packet counts, over every interface.
public final class DiscoveryStatistics: Sendable {
    private let sentCount = Atomic<Int>(0)
    private let receivedCount = Atomic<Int>(0)
    private let rejectedCount = Atomic<Int>(0)

    public var packetsSent: Int { sentCount.load(ordering: .relaxed) }
    public var packetsReceived: Int { receivedCount.load(ordering: .relaxed) }
    /// Received packets that did not decode.
    public var packetsRejected: Int { rejectedCount.load(ordering: .relaxed) }

    func sent() { sentCount.add(1, ordering: .relaxed) }
    func received() { receivedCount.add(1, ordering: .relaxed) }
    func rejected() { rejectedCount.add(1, ordering: .relaxed) }
}
