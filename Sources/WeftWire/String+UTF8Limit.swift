extension String {
    /// The longest prefix whose UTF-8 form fits in `limit` bytes, cut on a character boundary
    /// (SPEC.md §1: Weft shortens over-long text of its own this way).
    package func truncatedToUTF8(_ limit: Int) -> String {
        if utf8.count <= limit { return self }
        var result = ""
        for character in self {
            if result.utf8.count + character.utf8.count > limit { break }
            result.append(character)
        }
        return result
    }
}
