/// The feature bits of node info (SPEC.md §3.3): what a node understands beyond version 1's
/// messages. A peer uses a feature only with a node that sets its bit, so a node written from
/// a SPEC that defines no bits is never sent anything it does not know.
public struct NodeFeatures: OptionSet, Hashable, Sendable {
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Bit 0, *names*: the node understands the NAMES sync message (§14.12), by which peers
    /// tell each other the display names of users they know.
    public static let names = NodeFeatures(rawValue: 1 << 0)

    /// Bit 1, *content*: the node understands the content-transfer sync messages (§17.8):
    /// it answers what it holds of a content, serves manifests and chunks, and asks for them.
    public static let content = NodeFeatures(rawValue: 1 << 1)
}

extension NodeInfo {
    /// The feature bits as a set; bits this version does not define are kept, and mean nothing.
    public var supportedFeatures: NodeFeatures { NodeFeatures(rawValue: features) }
}
