import WeftControl
import WeftModel
import WeftNode

/// How text output names users: "you" for the local user, the display name of a user whose
/// node this node has met (with a short identifier beside it when two share a name), else a
/// short identifier. With `--ids`, the full identifier and the name beside it, as before.
/// JSON always carries full identifiers.
struct People {
    let localUser: UserID
    let displayNames: [UserID: String]
    let showIdentifiers: Bool
    private let sharedNames: Set<String>

    init(localUser: UserID, known: [KnownUser], showIdentifiers: Bool) {
        self.localUser = localUser
        self.showIdentifiers = showIdentifiers
        var names: [UserID: String] = [:]
        for user in known where !user.displayName.isEmpty { names[user.user] = user.displayName }
        displayNames = names
        var seen: Set<String> = []
        var shared: Set<String> = []
        for name in names.values where !seen.insert(name).inserted { shared.insert(name) }
        sharedNames = shared
    }

    /// The name text output shows for `user`.
    func name(_ user: UserID) -> String {
        let name = displayNames[user]
        if showIdentifiers { return "\(user)" + (user == localUser ? " (you)" : name.map { " (\($0))" } ?? "") }
        if user == localUser { return "you" }
        guard let name else { return Self.short(user) }
        return sharedNames.contains(name) ? "\(name) (\(Self.short(user)))" : name
    }

    /// Whether text output can name `user` by more than a short identifier.
    func knows(_ user: UserID) -> Bool { user == localUser || displayNames[user] != nil }

    /// The first characters of an identifier, enough to tell users apart at a glance.
    static func short(_ user: UserID) -> String { String("\(user)".prefix(13)) + "…" }
}

extension ControlConnection {
    /// The people of this node, for naming users in text output.
    func people(showIdentifiers: Bool) async throws -> People {
        guard case .status(let status) = try await request(.status) else { throw ControlClientError.unexpectedResponse("STATUS") }
        return People(localUser: status.user, known: try await users(), showIdentifiers: showIdentifiers)
    }
}
