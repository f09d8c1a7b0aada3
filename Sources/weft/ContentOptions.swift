import ArgumentParser
import WeftNode

/// `weft node`'s options for the rich content (SPEC.md §17) it fetches by itself.
///
/// By default a node fetches every content part of the conversations its user takes part in
/// (a recipient expects the attachments it was sent to be there, also once their sender is
/// offline) and keeps those of the conversations it only relays (store and forward: a relay
/// holds them for recipients that come later). `--download-on-demand` and `--no-relay-content`
/// turn either off; the parts still fetched by themselves are then those of at most
/// `--auto-download-limit` bytes and those of an `--auto-download-type`, and the others wait
/// for `weft download`.
struct ContentOptions: ParsableArguments {
    @Option(
        name: .customLong("auto-download-limit"),
        help: ArgumentHelp(
            "Fetch content parts of at most this size by themselves, in every conversation: bytes, or a number with K, M or G (1024, 1024², 1024³ bytes). (default: 2K, as in the SDK)",
            valueName: "size"))
    var automaticDownloadLimit: String?

    @Option(
        name: .customLong("auto-download-type"),
        help: ArgumentHelp(
            "Fetch content parts of this MIME type by themselves whatever their size, in every conversation: image/png, or image/* for every image (repeatable).",
            valueName: "mime"))
    var automaticDownloadTypes: [String] = []

    @Flag(
        name: .customLong("download-on-demand"),
        help: "Fetch the content parts of the conversations the local user takes part in only when asked (weft download), but for those within --auto-download-limit or of an --auto-download-type. (default: off, every part arrives by itself, as a messaging user expects of attachments)")
    var downloadOnDemand = false

    @Flag(
        inversion: .prefixedNo,
        help: "Fetch and keep the content parts of the conversations this node only relays, so that their recipients get them while the sender is offline (store and forward); --no-relay-content keeps only those within --auto-download-limit or of an --auto-download-type.")
    var relayContent = true

    func validate() throws {
        if let automaticDownloadLimit, Self.byteCount(automaticDownloadLimit) == nil {
            throw ValidationError("--auto-download-limit takes bytes, or a number with K, M or G (64K, 10M), not \"\(automaticDownloadLimit)\".")
        }
        for type in automaticDownloadTypes where MediaTypePattern(type) == nil {
            throw ValidationError("--auto-download-type takes a MIME type, type/subtype (image/png) or type/* (image/*), not \"\(type)\".")
        }
    }

    /// The content service's configuration these options make (values `validate` refused
    /// are left out).
    var configuration: ContentConfiguration {
        var configuration = ContentConfiguration()
        if let limit = automaticDownloadLimit.flatMap(Self.byteCount) { configuration.automaticDownloadLimit = limit }
        configuration.automaticDownloadTypes = automaticDownloadTypes.compactMap(MediaTypePattern.init)
        configuration.downloadsParticipantContent = !downloadOnDemand
        configuration.keepsRelayedContent = relayContent
        return configuration
    }

    /// The bytes `text` says: digits, optionally followed by K, M or G (binary multiples;
    /// `KB`, `KiB` and lowercase too); nil for anything else, or more than 2^64 − 1.
    static func byteCount(_ text: String) -> UInt64? {
        let units: [(suffixes: [String], shift: UInt64)] = [
            (["", "b"], 0), (["k", "kb", "kib"], 10), (["m", "mb", "mib"], 20), (["g", "gb", "gib"], 30),
        ]
        let lowered = text.lowercased()
        let digits = lowered.prefix { $0.isASCII && $0.isNumber }
        let suffix = String(lowered.dropFirst(digits.count))
        guard !digits.isEmpty, let value = UInt64(digits), let unit = units.first(where: { $0.suffixes.contains(suffix) }),
            value <= UInt64.max >> unit.shift
        else { return nil }
        return value << unit.shift
    }
}
