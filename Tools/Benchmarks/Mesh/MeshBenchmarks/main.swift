import Foundation
import WeftControl

// The mesh's benchmarks (issue 7): figures, goals and limits side by side, measured in one run.
//
//     MeshBenchmarks [--weft PATH] [--only footprint,end-to-end,catch-up,reconciliation,spread] [--quick] [--messages N] [--senders N] [--window N] [--batch N] [--spread-messages N]
//
// `--quick` runs each at a tenth of its size (a smoke test of the harness, not the figures);
// `--messages N` sets the end-to-end run's message count (default 20,000), `--spread-messages N`
// the spread's (default 2,000); `--senders N` how many control connections send at once in the
// end-to-end run (default 8), `--window N` how many requests each keeps in flight (default 2;
// a node answers at most 16 at once per connection), `--batch N` how many messages each
// request carries (a SEND BATCH, default 64; 1 sends SENDs).

var selected: Set<String> = ["footprint", "end-to-end", "catch-up", "reconciliation", "spread"]
var quick = false
var endToEndMessages: Int?
var endToEndSenders: Int?
var endToEndWindow: Int?
var endToEndBatch: Int?
var spreadMessages: Int?
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--weft": weftBinary = URL(fileURLWithPath: arguments.next() ?? "")
    case "--only": selected = Set((arguments.next() ?? "").split(separator: ",").map(String.init))
    case "--quick": quick = true
    case "--messages": endToEndMessages = Int(arguments.next() ?? "")
    case "--spread-messages": spreadMessages = Int(arguments.next() ?? "")
    case "--senders": endToEndSenders = Int(arguments.next() ?? "")
    case "--window": endToEndWindow = Int(arguments.next() ?? "")
    case "--batch": endToEndBatch = Int(arguments.next() ?? "")
    default:
        FileHandle.standardError.write(Data("unknown argument \(argument)\n".utf8))
        exit(2)
    }
}
guard FileManager.default.isExecutableFile(atPath: weftBinary.path) else {
    FileHandle.standardError.write(Data("no weft binary at \(weftBinary.path) (build it: swift build -c release --product weft)\n".utf8))
    exit(2)
}

/// One line of the table.
struct Row {
    var benchmark: String
    var figure: String
    var goal: String
    var limit: String
    var met: Bool?
}

func log(_ line: String) { FileHandle.standardError.write(Data("\(line)\n".utf8)) }
func format(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
func median<T: Comparable>(_ values: [T]) -> T { values.sorted()[values.count / 2] }

var rows: [Row] = []
let cores = ProcessInfo.processInfo.activeProcessorCount
let verifyRate = SignatureLimit.verificationsPerSecond()
log("Ed25519 verification: \(format(verifyRate)) per second on one core, \(cores) cores")
let verifyLimit = "verify \(format(verifyRate / 1000, 1))k/s/core"

if selected.contains("footprint") {
    let directory = try TemporaryDirectory("footprint")
    let result = try await Footprint(starts: quick ? 2 : 5).run(in: directory.url)
    let startMs = result.startToListening.map { $0.seconds * 1000 }
    log("footprint: start to listening \(startMs.map { format($0) }) ms; idle RSS \(result.residentMegabytes.map { format($0, 1) }) MB")
    rows.append(Row(
        benchmark: "Footprint: idle node resident memory (median of \(result.residentMegabytes.count))",
        figure: "\(format(median(result.residentMegabytes), 1)) MB", goal: "< 30 MB", limit: "-",
        met: median(result.residentMegabytes) < 30))
    rows.append(Row(
        benchmark: "Footprint: spawn to listening (median of \(startMs.count); first \(format(startMs[0])) ms)",
        figure: "\(format(median(startMs))) ms", goal: "< 300 ms", limit: "-", met: median(startMs) < 300))
}

if selected.contains("end-to-end") {
    let directory = try TemporaryDirectory("e2e")
    var benchmark = EndToEnd(messages: endToEndMessages ?? (quick ? 2_000 : 20_000))
    if let endToEndSenders { benchmark.connections = endToEndSenders }
    if let endToEndWindow { benchmark.window = endToEndWindow }
    if let endToEndBatch { benchmark.batch = min(max(endToEndBatch, 1), ControlConstants.maxBatchCount) }
    let shape = benchmark.batch == 1 ? "SENDs" : "SEND BATCHes of \(benchmark.batch)"
    log("end to end: A–B–C, \(benchmark.messages) messages, \(benchmark.connections) connections with \(benchmark.window) \(shape) in flight each...")
    let result = try await benchmark.run(in: directory.url)
    let rate = Double(result.messages) / result.deliveredAtA.seconds
    log("end to end: sent in \(format(result.sent.seconds, 2)) s, held by C at \(format(result.heldByC.seconds, 2)) s, delivered at A at \(format(result.deliveredAtA.seconds, 2)) s")
    rows.append(Row(
        benchmark: "End to end: A–B–C processes, \(result.messages) messages, until C holds all and A sees all delivered "
            + "(SENDs took \(format(result.sent.seconds, 1)) s; C held all at \(format(result.heldByC.seconds, 1)) s)",
        figure: "\(format(rate)) msgs/s (\(format(result.deliveredAtA.seconds, 1)) s)", goal: ">= 5,000 msgs/s",
        limit: "\(verifyLimit) (each hop verifies)", met: rate >= 5_000))
}

if selected.contains("catch-up") {
    let directory = try TemporaryDirectory("catchup")
    let benchmark = quick ? CatchUp(conversations: 10, messagesPerConversation: 1_000) : CatchUp()
    log("catch-up: building \(benchmark.conversations) x \(benchmark.messagesPerConversation) messages...")
    let result = try await benchmark.run(in: directory.url)
    let rate = Double(result.operations) / result.elapsed.seconds
    log("catch-up: built in \(format(result.built.seconds, 1)) s; \(result.operations) operations in \(format(result.elapsed.seconds, 2)) s")
    rows.append(Row(
        benchmark: "Catch-up: a new node joins one holding \(benchmark.conversations) x \(benchmark.messagesPerConversation) messages, "
            + "spawn until it holds every operation",
        figure: "\(format(rate)) ops/s (\(result.operations) in \(format(result.elapsed.seconds, 1)) s)", goal: ">= 10,000 ops/s",
        limit: "\(verifyLimit) x \(cores) = \(format(verifyRate * Double(cores) / 1000, 1))k/s", met: rate >= 10_000))
}

if selected.contains("spread") {
    let benchmark = Spread(nodes: 20, messages: spreadMessages ?? (quick ? 200 : 2_000))
    log("spread: \(benchmark.nodes) node processes (LocalMesh), \(benchmark.messages) messages...")
    let result = try await benchmark.run(weft: weftBinary)
    let counters = result.counters
    log("spread: \(format(result.elapsed.seconds, 2)) s; \(result.operations) operations; \(format(result.receptionsPerOperation, 2)) receptions per op per node")
    log("spread: " + counters.sorted(by: { $0.key < $1.key }).map { "\($0.key) \($0.value)" }.joined(separator: ", "))
    rows.append(Row(
        benchmark: "Spread: \(result.nodes) node processes (LocalMesh), degree 3, \(result.messages) messages at random nodes, until all hold all",
        figure: "\(format(result.elapsed.seconds, 2)) s (\(format(Double(result.messages) / result.elapsed.seconds)) msgs/s)",
        goal: "-", limit: "-", met: nil))
    rows.append(Row(
        benchmark: "Spread: receptions per operation per node (\(result.operations) operations incl. receipts; \(counters["duplicatesReceived", default: 0]) duplicates, \(counters["grafts", default: 0]) grafts)",
        figure: format(result.receptionsPerOperation, 2), goal: "<= 1.2", limit: "1.0 (gossipsub ~3)",
        met: result.receptionsPerOperation <= 1.2))
}

if selected.contains("reconciliation") {
    let conversations = quick ? 1_000 : 10_000
    for missing in [0, 100] {
        log("reconciliation: \(conversations) conversations, \(missing) operations missing on one side...")
        let result = try await Reconciliation(conversations: conversations, missing: missing).run()
        log("reconciliation: \(result.bytes) bytes in \(format(result.elapsed.seconds, 2)) s (\(result.bytesByType.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))); the missing operations are \(result.missingBytes) bytes")
        if missing == 0 {
            rows.append(Row(
                benchmark: "Reconciliation: two in-process nodes holding the same \(conversations) conversations connect; sync bytes until in sync",
                figure: "\(result.bytes) B", goal: "< 2,048 B", limit: "-", met: result.bytes < 2_048))
        } else {
            let goal = Double(result.missingBytes) * 1.2 + 1_024
            rows.append(Row(
                benchmark: "Reconciliation: the same with \(missing) operations (\(result.missingBytes) B) missing on one side",
                figure: "\(result.bytes) B", goal: "< \(format(goal)) B (1.2 x ops + 1 KB)", limit: "\(result.missingBytes) B",
                met: Double(result.bytes) < goal))
        }
    }
}

print("| Benchmark | Figure | Goal | Limit | Met |")
print("| --- | --- | --- | --- | --- |")
for row in rows {
    print("| \(row.benchmark) | \(row.figure) | \(row.goal) | \(row.limit) | \(row.met.map { $0 ? "yes" : "no" } ?? "-") |")
}
