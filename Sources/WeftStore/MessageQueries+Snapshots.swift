import Foundation
import GRDB
import WeftModel

// Message snapshots from their rows: parts, statuses (with the local user's delivery failures
// over them) and positions, read together for a set of rows.
extension MessageQueries {
    /// One message, by identifier, in its canonical conversation.
    static func message(_ id: OperationID, in db: Database) throws -> MessageSnapshot? {
        let rows = try Row.fetchAll(db.cached("\(columns) WHERE m.id = ?"), arguments: [Data(id.bytes)])
        return try messages(rows: rows, countingFromEnd: true, in: db).first
    }

    /// The columns `messages(rows:countingFromEnd:firstPosition:in:)` reads, in its order.
    static let columns = """
        SELECT m.id, m.conversation, m.postedTo, m.sender, m.sentAt, m.notificationText, m.notificationSound, m.number
        FROM message m
        """

    /// Snapshots for message rows (in `columns` order), with their parts, statuses and
    /// positions, in the order of the rows.
    /// `firstPosition`: the first row's position, when the query says it (the rows are then
    /// consecutive, in position order).
    static func messages(rows: [Row], countingFromEnd: Bool, firstPosition: Int? = nil, in db: Database) throws -> [MessageSnapshot] {
        guard !rows.isEmpty else { return [] }
        struct Key {
            var conversation: Data
            var sentAt: Int64
            var sender: Data
            var id: Data
        }
        let keys = try rows.map {
            Key(
                conversation: try $0.blob(1, "message.conversation"), sentAt: try $0.integer(4, "message.sentAt"),
                sender: try $0.blob(3, "message.sender"), id: try $0.blob(0, "message.id"))
        }
        // Parts and statuses by message row number.
        var parts: [Int64: [MessagePart]] = [:]
        var statuses: [Int64: [UserID: RecipientStatus]] = [:]
        let numbers = try rows.map { try $0.integer(7, "message.number") }
        for chunk in numbers.chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try Row.fetchAll(
                db.cached("SELECT message, mimeType, data, content, size FROM part WHERE message IN (\(marks)) ORDER BY message, \"index\""),
                arguments: StatementArguments(chunk))
            {
                let mimeType = try row.text(1, "part.mimeType")
                let part: MessagePart
                if let content = try row.optionalBlob(3, "part.content") {
                    do {
                        part = MessagePart(mimeType: mimeType, content: try ContentDescriptor(encoding: [UInt8](content)))
                    } catch {
                        throw StoreError.damaged("part.content", "does not decode: \(error)")
                    }
                } else {
                    let data = try row.blob(2, "part.data")
                    let size = Int(try row.integer(4, "part.size"))
                    part = data.count == size
                        ? MessagePart(mimeType: mimeType, data: [UInt8](data))
                        : MessagePart(mimeType: mimeType, unloadedByteCount: size)
                }
                parts[try row.integer(0, "part.message"), default: []].append(part)
            }
            for row in try Row.fetchAll(
                db.cached("SELECT message, recipient, status FROM receipt WHERE message IN (\(marks))"),
                arguments: StatementArguments(chunk))
            {
                // A status number the store does not know reads as invalid, as the model's does.
                statuses[try row.integer(0, "receipt.message"), default: [:]][try row.userID(1, "receipt.recipient")] =
                    RecipientStatus(rawValue: Int(try row.integer(2, "receipt.status"))) ?? .invalid
            }
        }

        // Positions: per conversation, the keys in order, each counted from the previous one
        // over the order index, so the cost is the span the results cover from one end.
        var positions: [Data: Int] = [:]
        if let firstPosition {
            for (index, key) in keys.enumerated() { positions[key.id] = firstPosition + index }
        }
        for (conversation, group) in Dictionary(grouping: keys, by: \.conversation) where firstPosition == nil {
            let sorted = group.sorted { a, b in
                if a.sentAt != b.sentAt { return a.sentAt < b.sentAt }
                if a.sender != b.sender { return a.sender.lexicographicallyPrecedes(b.sender) }
                return a.id.lexicographicallyPrecedes(b.id)
            }
            let between = try db.cachedStatement(sql: """
                SELECT COUNT(*) FROM message WHERE conversation = ?
                    AND (sentAt, sender, id) > (?, ?, ?) AND (sentAt, sender, id) < (?, ?, ?)
                """)
            func count(after a: Key?, before b: Key?) throws -> Int {
                switch (a, b) {
                case (let a?, let b?):
                    return try Int.fetchOne(between, arguments: [conversation, a.sentAt, a.sender, a.id, b.sentAt, b.sender, b.id]) ?? 0
                case (let a?, nil):
                    return try Int.fetchOne(db.cached("""
                        SELECT COUNT(*) FROM message WHERE conversation = ? AND (sentAt, sender, id) > (?, ?, ?)
                        """), arguments: [conversation, a.sentAt, a.sender, a.id]) ?? 0
                case (nil, let b?):
                    return try Int.fetchOne(db.cached("""
                        SELECT COUNT(*) FROM message WHERE conversation = ? AND (sentAt, sender, id) < (?, ?, ?)
                        """), arguments: [conversation, b.sentAt, b.sender, b.id]) ?? 0
                case (nil, nil):
                    preconditionFailure("a position is counted from a message")
                }
            }
            if countingFromEnd {
                let total = try Int.fetchOne(db.cached("SELECT messageCount FROM conversation WHERE id = ?"), arguments: [conversation]) ?? 0
                guard let last = sorted.last else { continue }
                var position = total - 1 - (try count(after: last, before: nil))
                positions[last.id] = position
                for index in stride(from: sorted.count - 2, through: 0, by: -1) {
                    position -= 1 + (try count(after: sorted[index], before: sorted[index + 1]))
                    positions[sorted[index].id] = position
                }
            } else {
                var position = try count(after: nil, before: sorted[0])
                positions[sorted[0].id] = position
                for index in sorted.indices.dropFirst() {
                    position += 1 + (try count(after: sorted[index - 1], before: sorted[index]))
                    positions[sorted[index].id] = position
                }
            }
        }

        // Delivery failures of the local user's messages (local facts, `DeliveryFailures`).
        let failures = try DeliveryFailures.failureReasons(of: keys.map(\.id), in: db)
        // And why an unsent one waits, shown beside its pending recipients.
        let waiting = try Outbox.waitingReasons(of: keys.map(\.id), in: db)
        return try rows.enumerated().map { index, row in
            let key = keys[index]
            var (status, reasons) = DeliveryFailures.overlay(statuses[numbers[index]] ?? [:], failures: failures[key.id])
            if let reason = waiting[key.id] {
                // The replica says `sent` until the outbox does better (the client shows pending).
                for (user, recipientStatus) in status where recipientStatus == .pending || recipientStatus == .sent { reasons[user] = reason }
            }
            // Every key was given a position above, from its conversation's group.
            guard let position = positions[key.id] else {
                throw StoreError(.damagedStore, "message \(key.id.hexPrefix) has no position in its conversation")
            }
            return MessageSnapshot(
                try Stored.operationID(key.id, "message.id"), conversation: try Stored.conversationID(key.conversation, "message.conversation"),
                postedTo: try row.conversationID(2, "message.postedTo"),
                sender: try Stored.userID(key.sender, "message.sender"), sentAt: HLCTimestamp(databaseValue: key.sentAt),
                parts: parts[numbers[index]] ?? [],
                options: MessageOptions(
                    notificationText: try row.optionalText(5, "message.notificationText"),
                    notificationSound: try row.optionalText(6, "message.notificationSound")),
                position: position, recipientStatus: status, failureReasons: reasons)
        }
    }
}
