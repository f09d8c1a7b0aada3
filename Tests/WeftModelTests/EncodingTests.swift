import Testing
import WeftCrypto
@testable import WeftModel

private let alice = Fixtures.users[0]
private let bob = Fixtures.users[1]
private let someConversation = ConversationID(bytes: Array(0x10..<0x20))!
private let cause1 = OperationID(bytes: [UInt8](repeating: 0x11, count: 32))!
private let cause2 = OperationID(bytes: [UInt8](repeating: 0x22, count: 32))!

/// One operation of each kind, by Alice, as the model would write it.
private let samples: [(String, Operation)] = {
    func op(_ body: OperationBody, sequence: UInt64 = 3, causes: [OperationID] = [cause1, cause2]) -> Operation {
        Operation(author: alice, conversation: someConversation, sequence: sequence,
            timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000, counter: 7), causes: causes, body: body)
    }
    var create = op(.createConversation(participants: [alice, bob].sorted(), distinct: true, generation: 1, metadata: ["title": "hi", "a": "b"]),
        sequence: 1, causes: [])
    create.conversation = ConversationLog.derivedID(of: create)
    return [
        ("create", create),
        ("add", op(.addParticipants([bob]))),
        ("remove", op(.removeParticipants([alice, bob].sorted()))),
        ("setMetadata", op(.setMetadata(["title": "new", "gone": nil]))),
        ("post", op(.postMessage(
            parts: [MessagePart(mimeType: "text/plain", data: Array("hello".utf8)), MessagePart(mimeType: "image/png", data: [0, 1, 2])],
            options: MessageOptions(notificationText: "new message", notificationSound: nil)))),
        ("delivered", op(.delivered([cause1, cause2]))),
        ("read", op(.read([cause2]))),
        ("markAllRead", op(.markAllRead)),
        ("delete", op(.deleteMessage(cause1))),
    ]
}()

/// Signs raw fields with Alice's key and decodes their wire form: it must fail for `reason`.
private func expectRefused(_ raw: RawOperation, _ reason: OperationError.Reason, _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation) {
    let wire = raw.wire(signedBy: Fixtures.identities[0])
    do {
        let op = try SignedOperation(wireBytes: wire)
        Issue.record("decoded \(op.operation.body) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
    } catch {
        #expect(error.reason == reason, "\(error) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
    }
    #expect(throws: OperationError.self, sourceLocation: sourceLocation) { try Operation(decoding: raw.encoding) }
}

/// The sample of `kind` with its body replaced.
private func raw(_ kind: String, body: [UInt8]? = nil) -> RawOperation {
    var raw = RawOperation(samples.first { $0.0 == kind }!.1)
    if let body { raw.body = body }
    return raw
}

private func body(_ build: (inout RawWriter) -> Void) -> [UInt8] {
    var w = RawWriter()
    build(&w)
    return w.bytes
}

/// Bytes that are not UTF-8: overlong, surrogate, truncated, stray continuation, past U+10FFFF, 5 bytes.
private let invalidUTF8: [[UInt8]] = [[0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]

@Suite("operation encoding")
struct EncodingTests {
    @Test("each kind round-trips: decoding the encoding gives the operation, and the wire form the same identifier", arguments: samples.map(\.0))
    func roundTrip(kind: String) throws {
        let op = samples.first { $0.0 == kind }!.1
        let encoding = op.encoded()
        #expect(try Operation(decoding: encoding) == op)
        #expect(try Operation(decoding: encoding).encoded() == encoding)
        #expect(RawOperation(op).encoding == encoding)
        let signed = SignedOperation(signing: op, with: Fixtures.identities[0])
        let decoded = try SignedOperation(wireBytes: signed.wireBytes, claimedID: signed.id)
        #expect(decoded == signed)
        #expect(decoded.hasValidSignature)
    }

    @Test("every truncation of the wire form and of the encoding is refused as malformed", arguments: samples.map(\.0))
    func truncations(kind: String) {
        let op = samples.first { $0.0 == kind }!.1
        let signed = SignedOperation(signing: op, with: Fixtures.identities[0])
        let wire = signed.wireBytes
        for length in 0..<wire.count {
            do {
                _ = try SignedOperation(wireBytes: Array(wire.prefix(length)))
                Issue.record("a wire form cut to \(length) of \(wire.count) bytes decoded")
            } catch {
                #expect(error.reason == .malformed)
            }
        }
        for length in 0..<signed.encoding.count {
            #expect(throws: OperationError.self, "cut to \(length)") { try Operation(decoding: Array(signed.encoding.prefix(length))) }
        }
        // One byte too many, after the signature and after the body.
        #expect(throws: OperationError.self) { try SignedOperation(wireBytes: wire + [0]) }
        var longer = RawOperation(op)
        longer.trailing = [0]
        expectRefused(longer, .malformed)
    }

    @Test("unknown versions and kinds are refused as such")
    func versionsAndKinds() {
        for version: UInt8 in [0, 2, 255] {
            var op = raw("post")
            op.version = version
            expectRefused(op, .unknownVersion)
        }
        for kind: UInt8 in [0, 11, 200, 255] {
            var op = raw("markAllRead")
            op.kind = kind
            expectRefused(op, .unknownKind)
        }
    }

    @Test("header lists: causes unsorted or repeated; a body longer or shorter than its length")
    func header() {
        var unsorted = raw("post")
        unsorted.causes = [cause2.bytes, cause1.bytes]
        expectRefused(unsorted, .malformed)
        var repeated = raw("post")
        repeated.causes = [cause1.bytes, cause1.bytes]
        expectRefused(repeated, .malformed)
        var trailingInBody = raw("delete")
        trailingInBody.body += [0]
        expectRefused(trailingInBody, .malformed)
        var shortBody = raw("delete")
        shortBody.body.removeLast()
        expectRefused(shortBody, .malformed)
        var trailingInMarkAllRead = raw("markAllRead")
        trailingInMarkAllRead.body = [0]
        expectRefused(trailingInMarkAllRead, .malformed)
    }

    @Test("participant lists: empty, unsorted, repeated, over 4096")
    func participantLists() {
        let (a, b) = (min(alice, bob).bytes, max(alice, bob).bytes)
        for users in [[], [b, a], [a, a]] as [[[UInt8]]] {
            expectRefused(raw("add", body: body { $0.list(users) }), .malformed, "add \(users.count)")
            expectRefused(raw("remove", body: body { $0.list(users) }), .malformed, "remove \(users.count)")
            expectRefused(raw("create", body: body { w in
                w.u8(1); w.u32(1); w.list(users); w.u16(0)
            }), .malformed, "create \(users.count)")
        }
        let many: [[UInt8]] = (0..<4097).map { (index: Int) -> [UInt8] in
            [UInt8](repeating: 0, count: 28) + withUnsafeBytes(of: UInt32(index).bigEndian, Array.init)
        }
        expectRefused(raw("add", body: body { $0.list(many) }), .malformed, "4097 users")
        // 4096 is allowed.
        #expect(throws: Never.self) { try SignedOperation(wireBytes: raw("add", body: body { $0.list(Array(many.prefix(4096))) }).wire(signedBy: Fixtures.identities[0])) }
    }

    @Test("creation and metadata: bad flags, keys unsorted, repeated or canonically equivalent, text that is not UTF-8")
    func metadata() {
        let participants = [min(alice, bob).bytes, max(alice, bob).bytes]
        func creation(distinct: UInt8 = 1, keys: [[UInt8]], values: [[UInt8]]? = nil) -> [UInt8] {
            body { w in
                w.u8(distinct); w.u32(1); w.list(participants); w.u16(keys.count)
                for (index, key) in keys.enumerated() { w.text(key); w.text(values?[index] ?? Array("v".utf8)) }
            }
        }
        func setting(_ entries: [([UInt8], UInt8, [UInt8]?)]) -> [UInt8] {
            body { w in
                w.u16(entries.count)
                for (key, flag, value) in entries {
                    w.text(key); w.u8(flag)
                    if let value { w.text(value) }
                }
            }
        }
        let (k1, k2) = (Array("a".utf8), Array("b".utf8))
        expectRefused(raw("create", body: creation(distinct: 2, keys: [])), .malformed, "distinct 2")
        expectRefused(raw("create", body: creation(keys: [k2, k1])), .malformed, "unsorted")
        expectRefused(raw("create", body: creation(keys: [k1, k1])), .malformed, "repeated")
        // "å" composed (c3 a5) and decomposed (61 cc 8a): sorted by bytes, but the same text.
        let composed: [UInt8] = [0xc3, 0xa5], decomposed: [UInt8] = [0x61, 0xcc, 0x8a]
        expectRefused(raw("create", body: creation(keys: [decomposed, composed])), .malformed, "equivalent")
        expectRefused(raw("setMetadata", body: setting([(decomposed, 0, nil), (composed, 0, nil)])), .malformed, "equivalent")
        expectRefused(raw("setMetadata", body: setting([])), .malformed, "no keys")
        expectRefused(raw("setMetadata", body: setting([(k1, 2, nil)])), .malformed, "flag 2")
        expectRefused(raw("setMetadata", body: setting([(k2, 0, nil), (k1, 0, nil)])), .malformed, "unsorted")
        expectRefused(raw("setMetadata", body: setting([(k1, 1, Array("x".utf8)), (k1, 0, nil)])), .malformed, "repeated")
        for bad in invalidUTF8 {
            expectRefused(raw("create", body: creation(keys: [bad])), .malformed, "key \(bad)")
            expectRefused(raw("create", body: creation(keys: [k1], values: [bad])), .malformed, "value \(bad)")
            expectRefused(raw("setMetadata", body: setting([(k1, 1, bad)])), .malformed, "value \(bad)")
        }
    }

    @Test("metadata keys go in UTF-8 byte order, which is not String order, and round-trip")
    func metadataKeyOrder() throws {
        // "a" + combining ring (61 cc 8a) sorts before "b" by bytes, after it as Swift strings.
        let decomposed = "a\u{30A}"
        #expect(Array(decomposed.utf8).lexicographicallyPrecedes(Array("b".utf8)))
        #expect(!(decomposed < "b"))
        let op = Operation(author: alice, conversation: someConversation, sequence: 2, timestamp: HLCTimestamp(rawValue: 5),
            causes: [cause1], body: .setMetadata([decomposed: "1", "b": "2"]))
        let decoded = try Operation(decoding: op.encoded())
        #expect(decoded == op)
        guard case .setMetadata(let entries) = decoded.body else { return }
        #expect(entries.keys.contains { Array($0.utf8) == [0x61, 0xcc, 0x8a] })
    }

    @Test("canonically equivalent keys written apart are one key; the winning write's spelling is shown")
    func equivalentKeysMerge() throws {
        var a = Peer(0)
        let create = a.create(with: [bob])
        let composed = a.write(.setMetadata(["\u{e5}": "composed"]), in: create.conversation)
        let decomposed = a.write(.setMetadata(["a\u{30A}": "decomposed"]), in: create.conversation)
        for order in [[create, composed, decomposed], [decomposed, composed, create]] {
            var replica = Replica(localUser: alice)
            _ = replica.apply(verified: order.map { SignedOperation(wireBytesOf: $0) })
            let metadata = try #require(replica.conversation(create.conversation)?.metadata)
            #expect(metadata.count == 1)
            #expect(metadata.keys.map { Array($0.utf8) } == [[0x61, 0xcc, 0x8a]])
            #expect(metadata.values.first == "decomposed")
        }
    }

    @Test("messages: no parts, a bad MIME type, a bad flag, text that is not UTF-8")
    func messages() {
        func post(parts: [(String, [UInt8])], flags: [UInt8] = [0, 0], text: [UInt8]? = nil) -> [UInt8] {
            body { w in
                w.u16(parts.count)
                for (mime, data) in parts { w.text(Array(mime.utf8)); w.blob(data) }
                w.u8(flags[0])
                if flags[0] == 1 { w.text(text ?? Array("t".utf8)) }
                w.u8(flags[1])
            }
        }
        expectRefused(raw("post", body: post(parts: [])), .malformed, "no parts")
        for mime in ["", "text", "text/", "/plain", "text/plain/x", "te xt/plain", "text/pl@in", "t\u{eb}xt/plain", "text/pl\u{7f}in",
            "text/(plain)", " text/plain", "text/plain\n", "text\t/plain"]
        {
            expectRefused(raw("post", body: post(parts: [(mime, [1])])), .malformed, "\(mime.debugDescription)")
            #expect(!MessagePart.isValidMIMEType(mime), "\(mime.debugDescription)")
        }
        for mime in ["text/plain", "text/plain; charset=utf-8", "application/vnd.weft+json", "image/svg+xml", "x-custom/x.y-z"] {
            #expect(MessagePart.isValidMIMEType(mime), "\(mime)")
            #expect(throws: Never.self) { try SignedOperation(wireBytes: raw("post", body: post(parts: [(mime, [1])])).wire(signedBy: Fixtures.identities[0])) }
        }
        expectRefused(raw("post", body: post(parts: [("text/plain", [1])], flags: [2, 0])), .malformed, "text flag")
        expectRefused(raw("post", body: post(parts: [("text/plain", [1])], flags: [0, 3])), .malformed, "sound flag")
        for bad in invalidUTF8 {
            expectRefused(raw("post", body: post(parts: [("text/plain", [1])], flags: [1, 0], text: bad)), .malformed, "\(bad)")
        }
        // A four-byte character is fine.
        #expect(throws: Never.self) {
            try SignedOperation(wireBytes: raw("post", body: post(parts: [("text/plain", [1])], flags: [1, 0], text: Array("🧵".utf8)))
                .wire(signedBy: Fixtures.identities[0]))
        }
    }

    @Test("receipts and deletions: empty, unsorted, repeated, the wrong length")
    func receipts() {
        for kind in ["delivered", "read"] {
            expectRefused(raw(kind, body: body { $0.list([]) }), .malformed, "\(kind) empty")
            expectRefused(raw(kind, body: body { $0.list([cause2.bytes, cause1.bytes]) }), .malformed, "\(kind) unsorted")
            expectRefused(raw(kind, body: body { $0.list([cause1.bytes, cause1.bytes]) }), .malformed, "\(kind) repeated")
        }
        expectRefused(raw("delete", body: Array(cause1.bytes.prefix(31))), .malformed)
        expectRefused(raw("delete", body: cause1.bytes + [0]), .malformed)
    }

    @Test("an encoding over 524288 bytes is refused, whoever wrote it")
    func tooLarge() throws {
        let big = Operation(author: alice, conversation: someConversation, sequence: 3, timestamp: HLCTimestamp(rawValue: 9),
            causes: [cause1], body: .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [UInt8](repeating: 0, count: Operation.maxByteCount))],
                options: MessageOptions()))
        #expect(throws: OperationError.self) { try SignedOperation(wireBytes: RawOperation(big).wire(signedBy: Fixtures.identities[0])) }
        #expect(throws: OperationError.self) { try Operation(decoding: big.encoded()) }
    }

    @Test("lists written unsorted or with repeats are kept as encoded, so the writer's replica agrees with its peers")
    func unsortedListsNormalised() throws {
        let (low, high) = (min(alice, bob), max(alice, bob))
        let body = OperationBody.createConversation(participants: [high, low, high], distinct: true, generation: 1, metadata: [:])
        var creation = Operation(author: alice, conversation: someConversation, sequence: 1, timestamp: HLCTimestamp(rawValue: 1 << 20),
            causes: [], body: body)
        creation.conversation = ConversationLog.derivedID(of: creation)
        guard case .createConversation(let participants, _, _, _) = creation.body else { return }
        #expect(participants == [low, high])
        let signed = SignedOperation(signing: creation, with: Fixtures.identities[0])
        #expect(try Operation(decoding: signed.encoding) == creation)

        // The writer's replica and a peer's put the creation in the same merge group as an Author's.
        var mine = Replica(localUser: alice)
        _ = mine.apply(verified: [signed])
        var peer = Replica(localUser: bob)
        _ = peer.apply(verified: [try SignedOperation(wireBytes: signed.wireBytes)])
        #expect(mine.distinctConversation(for: [alice, bob]) == creation.conversation)
        #expect(ReplicaDigest(mine) == ReplicaDigest(peer))

        let receipt = Operation(author: bob, conversation: someConversation, sequence: 2, timestamp: HLCTimestamp(rawValue: 9),
            causes: [cause2, cause1, cause2], body: .read([cause2, cause1, cause1]))
        #expect(receipt.causes == [cause1, cause2])
        #expect(receipt.body == .read([cause1, cause2]))
        #expect(try Operation(decoding: receipt.encoded()) == receipt)
    }

    @Test("an operation the local user writes that no peer could decode is refused locally too")
    func localOperationsCheckedAsPeersWould() throws {
        var a = Peer(0)
        let create = a.create(with: [bob])
        let hugePart = MessagePart(mimeType: "text/plain", data: [UInt8](repeating: 1, count: Operation.maxByteCount))
        let bodies: [OperationBody] = [
            .postMessage(parts: [], options: MessageOptions()),
            .postMessage(parts: [MessagePart(mimeType: "text", data: [1])], options: MessageOptions()),
            .postMessage(parts: [hugePart], options: MessageOptions()),
            .setMetadata([:]), .addParticipants([]), .removeParticipants([]), .read([]), .delivered([]),
        ]
        for body in bodies {
            let before = ReplicaDigest(a.replica)
            let op = a.write(body, in: create.conversation)
            #expect(a.refusal == .malformed, "\(body)")
            #expect(throws: OperationError.self, "\(body)") { try SignedOperation(wireBytes: op.wireBytes) }
            var after = ReplicaDigest(a.replica)
            after.rejected.remove(op.id)
            #expect(after == before)
        }
        let crowd = (0..<4096).map { index in PublicIdentity(unvalidatedBytes: [UInt8](repeating: 0xee, count: 28) + withUnsafeBytes(of: UInt32(index).bigEndian, Array.init)) }
        let tooMany = a.create(with: crowd)
        #expect(a.refusal == .malformed)
        #expect(throws: OperationError.self) { try SignedOperation(wireBytes: tooMany.wireBytes) }
    }
}

@Suite("operation encoding: mutated bytes")
struct MutatedEncodingTests {
    @Test("bytes that decode re-encode to themselves: one operation, one encoding (5,000 mutations of each kind)", arguments: samples.map(\.0))
    func mutationsAreCanonicalOrRefused(kind: String) {
        let encoding = samples.first { $0.0 == kind }!.1.encoded()
        var rng = SeededGenerator(seed: UInt64(kind.utf8.reduce(0) { $0 &* 31 &+ UInt64($1) }))
        var decoded = 0
        for round in 0..<5_000 {
            var bytes = encoding
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let index = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: bytes[index] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &rng)
                case 1: bytes[index] = UInt8.random(in: 0...255, using: &rng)
                case 2: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: index)
                default: bytes.remove(at: index)
                }
                if bytes.isEmpty { bytes = [1] }
            }
            guard let op = try? Operation(decoding: bytes) else { continue }
            decoded += 1
            if op.encoded() != bytes {
                Issue.record("round \(round): \(bytes.hexString) decodes to \(op.body) but re-encodes otherwise")
                return
            }
        }
        // Some mutations must survive decoding, or the test shows nothing.
        #expect(decoded > 20, "\(decoded) decoded")
    }
}
