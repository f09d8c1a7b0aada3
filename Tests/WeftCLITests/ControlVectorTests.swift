import Foundation
import NIOCore
import Testing
import WeftControl
import WeftCrypto
import WeftModel

/// `Protocol/vectors/control.json` (SPEC.md §15), checked in both directions: each request and
/// response built from its fields encodes to exactly the vector's bytes, and those bytes decode
/// to exactly that value; each invalid frame is refused with its ERROR code.
struct ControlVectors {
    let root: [String: Any]

    static func load() throws -> ControlVectors {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/control.json")
        return ControlVectors(root: try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any])
    }

    func entries(_ key: String) -> [[String: Any]] { root[key] as! [[String: Any]] }
}

// MARK: - Building values from the vectors' fields

private func bytes(_ hex: Any?) -> [UInt8] {
    let text = hex as! String
    return stride(from: 0, to: text.count, by: 2).map {
        let start = text.index(text.startIndex, offsetBy: $0)
        return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
    }
}
private func user(_ hex: Any?) -> UserID { PublicIdentity(unvalidatedBytes: bytes(hex)) }
private func conversation(_ hex: Any?) -> ConversationID { ConversationID(bytes: bytes(hex))! }
private func message(_ hex: Any?) -> OperationID { OperationID(bytes: bytes(hex))! }
private func u64(_ value: Any?) -> UInt64 { UInt64(value as! String)! }
private func u32(_ value: Any?) -> UInt32 { UInt32(value as! Int) }
private func optionalU64(_ value: Any?) -> UInt64? { value is NSNull ? nil : u64(value) }
private func status(_ name: Any?) -> DeliveryStatus { DeliveryStatus.allCases.first { "\($0)" == name as! String }! }

private func object(_ fields: Any?) -> ControlObjectID {
    let fields = fields as! [String: Any]
    if let id = fields["conversation"] { return .conversation(conversation(id)) }
    return .message(message(fields["message"]))
}

private func parts(_ fields: Any?) -> [ControlRequest.Part] {
    (fields as! [[String: Any]]).map { .init(mimeType: $0["mimeType"] as! String, data: bytes($0["dataHex"])) }
}

func request(from fields: [String: Any]) -> ControlRequest {
    switch fields["type"] as! String {
    case "PING": .ping(u64(fields["value"]))
    case "STATUS": .status
    case "PEERS": .peers
    case "USERS": .users
    case "CREATE CONVERSATION":
        .createConversation(.init(
            participants: (fields["participants"] as! [String]).map(user), distinct: fields["distinct"] as! Bool,
            announce: fields["announce"] as! Bool, metadata: fields["metadata"] as! [String: String]))
    case "ADD PARTICIPANTS": .addParticipants((fields["participants"] as! [String]).map(user), to: conversation(fields["conversation"]))
    case "REMOVE PARTICIPANTS": .removeParticipants((fields["participants"] as! [String]).map(user), from: conversation(fields["conversation"]))
    case "LEAVE": .leave(conversation(fields["conversation"]))
    case "CONVERSATIONS": .conversations(offset: u32(fields["offset"]))
    case "CONVERSATION": .conversation(conversation(fields["conversation"]))
    case "SEND":
        .send(parts(fields["parts"]), in: conversation(fields["conversation"]))
    case "SEND BATCH":
        .sendBatch((fields["messages"] as! [[String: Any]]).map { .init(parts($0["parts"]), in: conversation($0["conversation"])) })
    case "SEND FILES":
        .sendFiles((fields["parts"] as! [[String: Any]]).map { part in
            ControlRequest.FilePart(
                mimeType: part["mimeType"] as! String,
                source: (part["path"] as? String).map { .file($0) } ?? .data(bytes(part["dataHex"])))
        }, in: conversation(fields["conversation"]))
    case "MESSAGES": .messages(conversation(fields["conversation"]), offset: u32(fields["offset"]))
    case "MARK READ": .markRead(message(fields["message"]))
    case "MARK ALL READ": .markAllRead(conversation(fields["conversation"]))
    case "WAIT": .wait(object(fields["object"]), timeoutMilliseconds: u32(fields["timeoutMilliseconds"]))
    case "WATCH": .watch(messages: fields["messages"] as? Bool ?? false)
    case "STATISTICS": .statistics
    case "DOWNLOAD": .download(message(fields["message"]), part: UInt16(fields["part"] as! Int), path: fields["path"] as! String)
    case "CONNECT": .connect(address: fields["address"] as! String)
    case "DISCONNECT": .disconnect(address: fields["address"] as! String)
    case "CUT": .cut(user(fields["peer"]))
    case "HEAL": .heal(user(fields["peer"]))
    case let other: fatalError("no request \(other) in the vectors' vocabulary")
    }
}

private func conversationRecord(_ f: [String: Any]) -> ConversationRecord {
    ConversationRecord(
        id: conversation(f["conversation"]), creator: user(f["creator"]), createdAt: HLCTimestamp(rawValue: u64(f["createdAt"])),
        isDistinct: f["distinct"] as! Bool, participants: (f["participants"] as! [String]).map(user),
        merged: (f["merged"] as! [String]).map(conversation), metadata: f["metadata"] as! [String: String],
        messageCount: u32(f["messageCount"]), unreadCount: u32(f["unreadCount"]),
        lastMessageAt: optionalU64(f["lastMessageAt"]).map(HLCTimestamp.init(rawValue:)),
        unsyncedOperations: optionalU64(f["unsyncedOperations"]))
}

private func messageRecord(_ f: [String: Any]) -> MessageRecord {
    MessageRecord(
        id: message(f["message"]), conversation: conversation(f["conversation"]), sender: user(f["sender"]),
        sentAt: HLCTimestamp(rawValue: u64(f["sentAt"])), position: u32(f["position"]), isSent: f["isSent"] as! Bool,
        isUnread: f["isUnread"] as! Bool,
        parts: (f["parts"] as! [[String: Any]]).map { part in
            let content = (part["content"] as? [String: Any]).map { c in
                MessageRecord.ContentState(
                    root: bytes(c["root"]), status: ContentStatus.allCases.first { "\($0)" == c["status"] as! String }!,
                    verifiedBytes: u64(c["verifiedBytes"]), reason: c["reason"] as! String)
            }
            return .init(mimeType: part["mimeType"] as! String, size: u64(part["size"]), inlineData: bytes(part["inlineHex"]), content: content)
        },
        recipients: (f["recipients"] as! [[String: Any]]).map {
            .init(user: user($0["user"]), status: status($0["status"]), reason: $0["reason"] as! String)
        })
}

private func event(_ f: [String: Any]) -> ControlEvent {
    let change = ChangeKind.allCases.first { "\($0)" == (f["change"] as? String) }
    switch f["kind"] as! String {
    case "conversation": return .conversation(change!, conversation(f["conversation"]), property: f["property"] as! String)
    case "message":
        return .message(change!, message(f["message"]), conversation: f["conversation"] is NSNull ? nil : conversation(f["conversation"]),
            property: f["property"] as! String)
    case "delivery":
        return .delivery(message: message(f["message"]), recipient: user(f["recipient"]), status: status(f["status"]), reason: f["reason"] as! String)
    case "newMessage": return .newMessage(messageRecord(f["message"] as! [String: Any]))
    default: return .missed(u32(f["batches"]))
    }
}

func response(from f: [String: Any]) -> ControlResponse {
    switch f["type"] as! String {
    case "DONE": .done
    case "PONG": .pong(u64(f["value"]))
    case "STATUS RESULT":
        .status(NodeStatus(
            user: user(f["user"]), displayName: f["displayName"] as! String, listenAddress: f["listenAddress"] as! String,
            startedAt: u64(f["startedAt"]), connectedPeers: u32(f["connectedPeers"]), conversations: u32(f["conversations"]),
            unsentMessages: u32(f["unsentMessages"]), timeToLiveSeconds: u32(f["timeToLiveSeconds"]),
            retentionDays: u32(f["retentionDays"]), isReplicating: f["replicating"] as! Bool,
            heldOperations: optionalU64(f["heldOperations"]), unsyncedOperations: optionalU64(f["unsyncedOperations"]),
            discovery: f["discovery"] as! Bool, discoveryInterfaces: f["discoveryInterfaces"] as! [String]))
    case "PEERS RESULT":
        .peers((f["peers"] as! [[String: Any]]).map { p in
            let holdings = p["holdings"] as? [String: Any]
            return PeerRecord(
                user: user(p["user"]), displayName: p["displayName"] as! String, address: p["address"] as! String,
                origin: PeerRecord.Origin.allCases.first { "\($0)" == p["origin"] as! String }!, connectedAt: u64(p["connectedAt"]),
                holdings: holdings.map { PeerHoldings(conversations: u32($0["conversations"]), operations: u64($0["operations"])) })
        })
    case "USERS RESULT":
        .users((f["users"] as! [[String: Any]]).map {
            KnownUser(user: user($0["user"]), displayName: $0["displayName"] as! String, isConnected: $0["isConnected"] as! Bool)
        })
    case "STATISTICS RESULT":
        .statistics((f["counters"] as! [[String: Any]]).map { ReplicationCounter(name: $0["name"] as! String, value: u64($0["value"])) })
    case "CONVERSATION RESULT": .conversation(conversationRecord(f))
    case "CONVERSATIONS RESULT": .conversations(total: u32(f["total"]), (f["conversations"] as! [[String: Any]]).map(conversationRecord))
    case "SENT": .sent(message(f["message"]))
    case "SENT BATCH":
        .sentBatch((f["outcomes"] as! [[String: Any]]).map { outcome in
            if let id = outcome["message"] { return .sent(message(id)) }
            return .refused(ControlFailure(ControlFailure.Code(rawValue: UInt16(outcome["code"] as! Int)), outcome["text"] as! String))
        })
    case "MESSAGES RESULT": .messages(total: u32(f["total"]), (f["messages"] as! [[String: Any]]).map(messageRecord))
    case "FOUND": .found(object(f["object"]))
    case "WATCHING": .watching
    case "PROGRESS":
        .progress(DownloadProgress(
            verifiedBytes: u64(f["verifiedBytes"]), totalBytes: u64(f["totalBytes"]), wireBytes: u64(f["wireBytes"]),
            bytesPerSecond: u64(f["bytesPerSecond"]), status: ContentStatus.allCases.first { "\($0)" == f["status"] as! String }!,
            reason: f["reason"] as! String))
    case "EVENT": .event(event(f["event"] as! [String: Any]))
    case "ERROR": .error(ControlFailure(ControlFailure.Code(rawValue: UInt16(f["code"] as! Int)), f["text"] as! String))
    case let other: fatalError("no response \(other) in the vectors' vocabulary")
    }
}

/// The one frame in `hex`, read by the sans-I/O reader.
func readFrame(_ hex: String) throws(ControlFailure) -> ControlFrame? {
    var buffer = ByteBuffer(bytes: bytes(hex))
    return try ControlFrame.read(from: &buffer)
}

// MARK: - The tests

@Suite("Control protocol vectors (SPEC.md §15)")
struct ControlVectorTests {
    let vectors = try! ControlVectors.load()

    @Test("requests encode to the vectors' bytes and decode to their fields")
    func requests() throws {
        let kinds = Set(vectors.entries("requests").map { (($0["request"] as! [String: Any])["type"] as! String) })
        #expect(kinds.count == ControlRequest.Kind.allCases.count)
        for entry in vectors.entries("requests") {
            let expected = request(from: entry["request"] as! [String: Any])
            let id = UInt32(entry["requestID"] as! Int)
            #expect(Array(expected.frame(requestID: id).encoded.readableBytesView) == bytes(entry["hex"]), "\(entry["description"]!)")
            let frame = try #require(try readFrame(entry["hex"] as! String))
            #expect(frame.requestID == id)
            #expect(try ControlRequest(frame: frame) == expected, "\(entry["description"]!)")
        }
    }

    @Test("responses encode to the vectors' bytes and decode to their fields")
    func responses() throws {
        let kinds = Set(vectors.entries("responses").map { (($0["response"] as! [String: Any])["type"] as! String) })
        #expect(kinds.count == ControlResponse.Kind.allCases.count)
        for entry in vectors.entries("responses") {
            let expected = response(from: entry["response"] as! [String: Any])
            let id = UInt32(entry["requestID"] as! Int)
            #expect(Array(expected.frame(requestID: id).encoded.readableBytesView) == bytes(entry["hex"]), "\(entry["description"]!)")
            let frame = try #require(try readFrame(entry["hex"] as! String))
            #expect(try ControlResponse(frame: frame) == expected, "\(entry["description"]!)")
        }
    }

    @Test("a rich-content part with an unassigned status, more verified bytes than its size, or inline data does not parse")
    func invalidContentParts() throws {
        let entry = try #require(vectors.entries("responses").first { ($0["response"] as! [String: Any])["type"] as! String == "MESSAGES RESULT" })
        let good = entry["hex"] as! String
        let root = "db2fae66d8154655a89b4ea5b56f28ab1f398a5e15aab6c744d294e7b19dcd9c"
        let rootAt = try #require(good.range(of: root)).upperBound
        let status = good.index(rootAt, offsetBy: 2)
        let verifiedEnd = good.index(status, offsetBy: 16)
        let badStatus = good.replacingCharacters(in: rootAt..<status, with: "08")
        let tooMany = good.replacingCharacters(in: status..<verifiedEnd, with: String(format: "%016llx", 70_001))
        _ = try ControlResponse(frame: #require(try readFrame(good)))  // the unchanged frame parses
        for (what, hex) in [("status 8", badStatus), ("70,001 of 70,000 bytes verified", tooMany)] {
            let frame = try #require(try readFrame(hex))
            #expect(throws: ControlFailure.self, "\(what)") { try ControlResponse(frame: frame) }
        }
    }

    @Test("invalid frames are refused with their ERROR code")
    func invalid() {
        for entry in vectors.entries("invalid") {
            let code = UInt16(entry["errorCode"] as! Int)
            do {
                let frame = try readFrame(entry["hex"] as! String)
                _ = try ControlRequest(frame: #require(frame))
                Issue.record("accepted: \(entry["description"]!)")
            } catch let failure as ControlFailure {
                #expect(failure.code.rawValue == code, "\(entry["description"]!): \(failure)")
                #expect(failure.code.closesConnection)
            } catch {
                Issue.record("\(entry["description"]!): \(error)")
            }
        }
    }
}
