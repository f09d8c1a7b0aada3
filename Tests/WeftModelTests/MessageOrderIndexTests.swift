import Testing
import WeftCrypto
@testable import WeftModel

@Suite("message order: positions by binary search")
struct MessageOrderIndexTests {
    @Test("after random inserts (in and out of order, equal timestamps) and removals, every count equals the sorted list's")
    func matchesSorting() {
        var generator = SystemRandomNumberGenerator()
        let senders = (0..<3).map { _ in PublicIdentity(unvalidatedBytes: (0..<32).map { _ in UInt8.random(in: 0...255) }) }
        var order = MessageOrder()
        var live: [MessageOrder.Key] = []
        for step in 0..<600 {
            if step % 5 == 4, !live.isEmpty {
                let gone = live.remove(at: Int.random(in: 0..<live.count, using: &generator))
                order.remove(gone)
            } else {
                // Mostly later timestamps, sometimes an earlier one or a tie.
                let milliseconds = UInt64(step) - (step % 7 == 0 ? UInt64.random(in: 0...UInt64(step), using: &generator) : 0)
                let key = MessageOrder.Key(
                    HLCTimestamp(milliseconds: milliseconds, counter: 0), senders[step % 3],
                    OperationID(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })!)
                order.insert(key)
                live.append(key)
            }
            let sorted = live.sorted { $0.precedes($1) }
            #expect(order.count == sorted.count)
            for (index, key) in sorted.enumerated() where index % 17 == 0 || index == sorted.count - 1 {
                #expect(order.countPreceding(key) == index)
            }
        }
        // Removing a key that is not there changes nothing.
        let before = order.count
        order.remove(MessageOrder.Key(HLCTimestamp(milliseconds: 1, counter: 0), senders[0], OperationID(bytes: [UInt8](repeating: 9, count: 32))!))
        #expect(order.count == before)
    }
}
