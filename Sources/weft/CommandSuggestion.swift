import ArgumentParser

/// The nearest command to a mistyped one (`weft sned` → `send`), said before ArgumentParser
/// would answer with only "Unexpected argument".
enum CommandSuggestion {
    /// One sentence for the first word of `arguments` that names no subcommand where one is
    /// expected (the top level, or under a command with subcommands such as `conv`); nil when
    /// every word names one, or it is an option.
    static func unknownCommand(in arguments: [String]) -> String? {
        var subcommands: [any ParsableCommand.Type] = WeftCommand.configuration.subcommands
        var path = ["weft"]
        for word in arguments {
            guard !subcommands.isEmpty, !word.hasPrefix("-") else { return nil }
            var names: [String] = path.count == 1 ? ["help"] : []
            var next: (any ParsableCommand.Type)?
            for subcommand in subcommands {
                let name = subcommand.configuration.commandName ?? subcommand._commandName
                names.append(name)
                if name == word { next = subcommand }
            }
            guard let next else {
                if names.contains(word) { return nil }
                let nearest = names.min { distance(word, $0) < distance(word, $1) }
                let hint = nearest.flatMap { distance(word, $0) <= max(2, word.count / 3) ? " Did you mean \"\(path.joined(separator: " ")) \($0)\"?" : nil }
                return "\"\(word)\" is not a command of \(path.joined(separator: " ")).\(hint ?? " Run \"\(path.joined(separator: " ")) --help\" for the list.")"
            }
            subcommands = next.configuration.subcommands
            path.append(word)
        }
        return nil
    }

    /// Levenshtein distance: insertions, deletions and substitutions of characters.
    static func distance(_ a: String, _ b: String) -> Int {
        let (a, b) = (Array(a), Array(b))
        guard !a.isEmpty else { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
