import NIOCore

/// One named replication counter of a node since it started (SPEC.md §15.5, STATISTICS):
/// `operationsReceived`, `duplicatesReceived`, ... Names are the sync core's
/// (`SyncStatistics`); a client looks them up by name and ignores names it does not know.
public struct ReplicationCounter: Hashable, Sendable {
    public var name: String
    public var value: UInt64

    public init(name: String, value: UInt64) {
        self.name = name
        self.value = value
    }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeControlText(name, limit: ControlConstants.maxShortTextByteCount)
        buffer.writeInteger(value)
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> ReplicationCounter {
        ReplicationCounter(
            name: try buffer.readControlText("counter name", limit: ControlConstants.maxShortTextByteCount),
            value: try buffer.readU64("counter value"))
    }
}

extension Array where Element == ReplicationCounter {
    /// The value of the counter named `name`, if the node reports it.
    public subscript(counter name: String) -> UInt64? { first { $0.name == name }?.value }
}
