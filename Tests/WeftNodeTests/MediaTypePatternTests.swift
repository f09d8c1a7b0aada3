import Testing
import WeftNode

/// The MIME types a node fetches automatically (`ContentConfiguration.automaticDownloadTypes`).
@Suite("MIME type patterns for automatic downloads")
struct MediaTypePatternTests {
    @Test("a pattern matches parts of its type whatever their case, blanks and parameters", arguments: [
        ("image/png", "image/png", true), ("image/png", "IMAGE/PNG; name=a.png", true), ("image/png", " image/png ", true),
        ("image/png", "image/jpeg", false), ("image/png", "image/pngx", false), ("image/png", "text/png", false),
        ("image/*", "image/jpeg", true), ("image/*", "Image/SVG+XML", true), ("image/*", "imagex/png", false),
        ("image/*", "video/mp4", false), ("*/*", "application/octet-stream", true), ("Text/Plain", "text/plain; charset=utf-8", true),
        ("image/*", "image", false),
    ])
    func matches(pattern: String, mimeType: String, expected: Bool) throws {
        let parsed = try #require(MediaTypePattern(pattern))
        #expect(parsed.matches(mimeType) == expected, "\(pattern) against \(mimeType)")
    }

    @Test("only type/subtype, type/* and */* are patterns", arguments: [
        "", "image", "image/", "/png", "*/png", "image/*png", "im*ge/png", "image/png; q=1", "image/png/x", "image /png", "imäge/png",
    ])
    func refused(text: String) {
        #expect(MediaTypePattern(text) == nil, "\(text)")
    }

    @Test("a pattern is written as it matches: lowercase")
    func description() {
        #expect(MediaTypePattern("Image/*")?.description == "image/*")
    }
}
