import WeftCrypto

/// Which discovered nodes a node dials (SPEC.md §16.3), sans I/O: those of its own mesh (the
/// same tag) other than itself, at the SRV's port and an address of the host, from when they
/// are found until they are lost. The caller dials an address it is told to and stops dialing
/// it when told (its dialer keeps the usual backoff in between).
public struct DiscoveredPeers: Sendable {
    public enum Action: Hashable, Sendable {
        /// Start dialing `host:port` (a node of this mesh appeared, or moved).
        case dial(address: String, user: PublicIdentity)
        /// Stop dialing it (gone, or moved elsewhere).
        case forget(address: String)
    }

    public let localUser: PublicIdentity
    public let meshTag: [UInt8]
    /// The address dialed for each instance.
    public private(set) var dialing: [DNSName: String] = [:]
    /// Instances seen whose tag is another mesh's: never dialed (counted, for logs).
    public private(set) var otherMeshes: Set<DNSName> = []

    public init(localUser: PublicIdentity, meshTag: [UInt8]) {
        self.localUser = localUser
        self.meshTag = meshTag
    }

    public mutating func apply(_ change: MDNSBrowser.Change) -> [Action] {
        switch change {
        case .found(let node):
            guard node.record.meshTag == meshTag else {
                otherMeshes.insert(node.instance)
                return forget(node.instance)
            }
            guard node.record.user != localUser, let address = Self.address(of: node) else { return forget(node.instance) }
            if dialing[node.instance] == address { return [] }
            var actions = forget(node.instance)
            dialing[node.instance] = address
            actions.append(.dial(address: address, user: node.record.user))
            return actions
        case .lost(let instance):
            otherMeshes.remove(instance)
            return forget(instance)
        }
    }

    private mutating func forget(_ instance: DNSName) -> [Action] {
        guard let address = dialing.removeValue(forKey: instance) else { return [] }
        return [.forget(address: address)]
    }

    /// `host:port` for the first IPv4 address (then IPv6, bracketed): every node advertises
    /// the addresses of the interface it answers on, so the first is on the LAN they share.
    static func address(of node: DiscoveredNode) -> String? {
        if let v4 = node.addresses.first(where: { $0.count == 4 }) {
            return v4.map(String.init).joined(separator: ".") + ":\(node.port)"
        }
        if let v6 = node.addresses.first(where: { $0.count == 16 }) {
            let groups = stride(from: 0, to: 16, by: 2).map { String(UInt16(v6[$0]) << 8 | UInt16(v6[$0 + 1]), radix: 16) }
            return "[" + groups.joined(separator: ":") + "]:\(node.port)"
        }
        return nil
    }
}
