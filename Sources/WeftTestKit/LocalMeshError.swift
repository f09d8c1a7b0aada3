/// Why a LocalMesh operation failed, in one sentence (with the node's log tail when a node
/// process is involved).
public struct LocalMeshError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) { self.description = description }
}
