import Foundation
import Testing
import WeftCrypto
@testable import WeftDiscovery

@Suite("What a node advertises: the mesh tag and the TXT record (SPEC.md §16.1)")
struct ServiceRecordTests {
    let vectors: [String: Any] = {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/discovery.json")
        return try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
    }()

    static func bytes(_ hex: Any?) -> [UInt8] { WeftServiceRecord.bytes(hex: hex as! String)! }

    @Test("the mesh tag is the vectors' HMAC-BLAKE2b of the fixed text, and differs between meshes")
    func meshTag() throws {
        for entry in vectors["meshTag"] as! [[String: Any]] {
            let key = MeshKey(secret: SecureBytes(copying: Self.bytes(entry["meshKeyHex"])))
            #expect(key.tag == Self.bytes(entry["tagHex"]))
        }
        #expect(MeshKey.generate().tag != MeshKey.generate().tag)
        #expect(MeshKey.generate().tag.count == 16)
    }

    @Test("the TXT strings are the vectors', and read back; records that name no Weft node are refused")
    func txt() throws {
        for entry in vectors["txt"] as! [[String: Any]] {
            let user = try UserIdentifier.decode(entry["user"] as! String)
            let record = WeftServiceRecord(user: user, meshTag: Self.bytes(entry["tagHex"]))
            let strings = (entry["strings"] as! [String]).map { Array($0.utf8) }
            #expect(record.txtStrings == strings)
            #expect(WeftServiceRecord(txt: strings) == record)
            // Unknown keys are ignored, the first of a repeated key counts, keys in any case.
            #expect(WeftServiceRecord(txt: [Array("extra=1".utf8), Array("V=1".utf8)] + strings.dropFirst() + [Array("mesh=00".utf8)]) == record)
            for missing in strings.indices {
                var partial = strings
                partial.remove(at: missing)
                #expect(WeftServiceRecord(txt: partial) == nil, "without \(String(decoding: strings[missing], as: UTF8.self))")
            }
            for bad in ["v=0", "v=one", "user=weft1nope", "mesh=0011", "mesh=zz" + String(repeating: "0", count: 30)] {
                let key = bad.split(separator: "=")[0]
                let replaced = strings.map { String(decoding: $0, as: UTF8.self).hasPrefix("\(key)=") ? Array(bad.utf8) : $0 }
                #expect(WeftServiceRecord(txt: replaced) == nil, "\(bad)")
            }
        }
    }
}

@Suite("The names a node advertises (SPEC.md §16.1)")
struct AdvertisedNamesTests {
    @Test("instance 'display name (tag)', the name cut at a character boundary to 48 bytes; host weft- and four bytes of the key")
    func names() throws {
        let user = try UserIdentifier.decode("weft1aoqqpp7tzyil4hlq3umoos6atft6jvrqtosq2xy53sdgiesvgg4powvuke")
        let tag = WeftServiceRecord.hex(Array(user.bytes.prefix(2)))
        let service = AdvertisedService(displayName: "alice", user: user, meshTag: MeshKey.generate().tag, port: 7400, addresses: [[10, 0, 0, 1]])
        #expect(service.instanceLabel == "alice (\(tag))")
        #expect(service.hostLabel == "weft-" + WeftServiceRecord.hex(Array(user.bytes.prefix(4))))
        #expect(WeftServiceRecord(txt: service.txt)?.user == user)
        // 47 ASCII bytes and a 2-byte character do not fit 48: the character goes whole.
        let long = String(repeating: "a", count: 47) + "é" + "b"
        let cut = AdvertisedService(displayName: long, user: user, meshTag: [], port: 1, addresses: [])
        #expect(cut.instanceLabel == String(repeating: "a", count: 47) + " (\(tag))")
        #expect(try DNSName(labels: [Array(cut.instanceLabel.utf8)]).labels.count == 1, "fits a DNS label")
    }
}
