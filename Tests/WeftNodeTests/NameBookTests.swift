import Testing
import WeftCrypto
import WeftSync
@testable import WeftNode

/// The rules a node keeps names by (SPEC.md §14.12): direct wins, one source per heard name,
/// news only, a bound per peer identity and one in all.
@Suite("NameBook: which names a node keeps and tells (SPEC.md §14.12)")
struct NameBookTests {
    typealias UserName = SyncMessage.UserName

    static func user(_ index: Int) -> PublicIdentity {
        PublicIdentity(unvalidatedBytes: [UInt8(index % 256), UInt8(index / 256 % 256), UInt8(index / 65_536)] + [UInt8](repeating: 9, count: 29))
    }

    static let (me, bob, dave, carol) = (user(900_000), user(900_001), user(900_002), user(900_003))

    static func book(capacity: Int = 4096, perPeer: Int = 1024) -> NameBook {
        NameBook(capacity: capacity, maxHeardPerPeer: perPeer, localUser: me)
    }

    static func name(of user: PublicIdentity, in book: NameBook) -> String? { book.known.first { $0.user == user }?.name }

    @Test("a handshake's name is news once; unchanged it is not, changed it is again")
    func direct() {
        var book = Self.book()
        #expect(book.learn("bob", of: Self.bob) == UserName(user: Self.bob, displayName: "bob"))
        #expect(book.learn("bob", of: Self.bob) == nil)
        #expect(book.learn("robert", of: Self.bob) == UserName(user: Self.bob, displayName: "robert"))
        #expect(book.learn("", of: Self.dave) == nil, "an empty name tells nothing")
        #expect(book.known.map(\.name) == ["robert", ""])
    }

    @Test("a heard name never replaces a direct one; a direct one replaces a heard one")
    func directWins() {
        var book = Self.book()
        _ = book.learn("carol", of: Self.carol)
        #expect(book.hear([UserName(user: Self.carol, displayName: "mallory")], from: Self.bob).isEmpty)
        #expect(Self.name(of: Self.carol, in: book) == "carol")
        #expect(book.heardCount(from: Self.bob) == 0)

        #expect(book.hear([UserName(user: Self.dave, displayName: "dave")], from: Self.bob).count == 1)
        #expect(book.known.first { $0.user == Self.dave }?.source == .heard(from: Self.bob))
        #expect(book.learn("dave", of: Self.dave) == nil, "the same name: not news")
        #expect(book.known.first { $0.user == Self.dave }?.source == .direct)
        #expect(book.heardCount(from: Self.bob) == 0, "a name replaced by a direct one makes room")
    }

    @Test("a heard name changes only by its first source; unchanged entries are not news, so the telling ends")
    func oneSource() {
        var book = Self.book()
        #expect(book.hear([UserName(user: Self.carol, displayName: "carol")], from: Self.bob).count == 1)
        #expect(book.hear([UserName(user: Self.carol, displayName: "carol")], from: Self.bob).isEmpty)
        #expect(book.hear([UserName(user: Self.carol, displayName: "not carol")], from: Self.dave).isEmpty)
        #expect(Self.name(of: Self.carol, in: book) == "carol")
        #expect(book.hear([UserName(user: Self.carol, displayName: "caroline")], from: Self.bob) == [UserName(user: Self.carol, displayName: "caroline")])
        #expect(Self.name(of: Self.carol, in: book) == "caroline")
    }

    @Test("entries about the node's own user, the sender itself, or with an empty name are ignored")
    func ignored() {
        var book = Self.book()
        let news = book.hear([
            UserName(user: Self.me, displayName: "not me"), UserName(user: Self.bob, displayName: "bob says bob"),
            UserName(user: Self.carol, displayName: ""),
        ], from: Self.bob)
        #expect(news.isEmpty)
        #expect(book.count == 0)
        #expect(book.dropped == 0)
    }

    @Test("at most maxHeardPerPeer users heard from one identity; past it entries are dropped and counted; others are not held back")
    func perPeer() {
        var book = Self.book(perPeer: 10)
        let names = (0..<25).map { UserName(user: Self.user($0), displayName: "user \($0)") }
        #expect(book.hear(Array(names[..<7]), from: Self.bob).count == 7)
        #expect(book.hear(Array(names[7...]), from: Self.bob).count == 3)
        #expect(book.heardCount(from: Self.bob) == 10)
        #expect(book.dropped == 15)
        // Changes to what it was kept for still go through; new users from another peer too.
        #expect(book.hear([UserName(user: Self.user(0), displayName: "renamed")], from: Self.bob).count == 1)
        #expect(book.hear([UserName(user: Self.user(30), displayName: "from dave")], from: Self.dave).count == 1)
        // A name of bob's replaced by a handshake makes room for one more.
        _ = book.learn("user 1", of: Self.user(1))
        #expect(book.hear([UserName(user: Self.user(40), displayName: "one more")], from: Self.bob).count == 1)
        #expect(book.hear([UserName(user: Self.user(41), displayName: "one too many")], from: Self.bob).isEmpty)
        #expect(book.heardCount(from: Self.bob) == 10)
    }

    @Test("full, a new name forgets the oldest heard one; a heard one never pushes out a direct one")
    func capacity() {
        var book = Self.book(capacity: 4, perPeer: 100)
        _ = book.learn("d0", of: Self.user(0))
        _ = book.hear((1...3).map { UserName(user: Self.user($0), displayName: "h\($0)") }, from: Self.bob)
        #expect(book.count == 4)
        // A new heard name forgets the oldest heard (h1), not the older direct d0.
        _ = book.hear([UserName(user: Self.user(4), displayName: "h4")], from: Self.dave)
        #expect(book.known.map(\.name) == ["d0", "h2", "h3", "h4"])
        #expect(book.heardCount(from: Self.bob) == 2)
        // Direct names push out heard ones first, then the oldest direct.
        for index in 5...8 { _ = book.learn("d\(index)", of: Self.user(index)) }
        #expect(book.known.map(\.name) == ["d5", "d6", "d7", "d8"])
        #expect(book.heardCount(from: Self.bob) == 0 && book.heardCount(from: Self.dave) == 0)
        // All direct: a heard name is dropped, not kept in a direct one's place.
        #expect(book.hear([UserName(user: Self.user(9), displayName: "h9")], from: Self.bob).isEmpty)
        #expect(book.dropped == 1)
        #expect(book.count == 4)
    }

    @Test("what a newly connected peer is told: all but its own name, names heard from it and empty ones, oldest first")
    func toTell() {
        var book = Self.book()
        _ = book.learn("bob", of: Self.bob)
        _ = book.learn("", of: Self.dave)
        _ = book.hear([UserName(user: Self.carol, displayName: "carol")], from: Self.bob)
        _ = book.hear([UserName(user: Self.user(1), displayName: "one")], from: Self.dave)
        #expect(book.names(toTell: Self.bob) == [UserName(user: Self.user(1), displayName: "one")])
        #expect(book.names(toTell: Self.dave) == [
            UserName(user: Self.bob, displayName: "bob"), UserName(user: Self.carol, displayName: "carol"),
        ])
    }

    @Test("a flood of new users from many identities keeps the book at its bound, the order's stale places swept")
    func churn() {
        var book = Self.book(capacity: 64, perPeer: 16)
        for peer in 0..<200 {
            let names = (0..<20).map { UserName(user: Self.user(peer * 20 + $0), displayName: "u") }
            _ = book.hear(names, from: Self.user(100_000 + peer))
            if peer % 7 == 0 { _ = book.learn("direct \(peer)", of: Self.user(peer * 20)) }
        }
        #expect(book.count == 64)
        #expect(book.dropped == 200 * 4)
        #expect(book.known.count == 64)
    }
}
