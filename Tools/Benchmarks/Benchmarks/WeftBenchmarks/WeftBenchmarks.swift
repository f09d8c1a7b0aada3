import Benchmark

/// Every benchmark of Weft's wire and crypto hot paths and the store, registered by the benchmark plugin.
///
/// Figures are reported, never asserted: the goals and limits they are read against live in the
/// report that accompanies a run, not here.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 5,
        maxDuration: .seconds(2),
        maxIterations: 1_000_000
    )
    Benchmark.teardown = { ScratchDirectories.removeAll() }

    registerHandshakeBenchmarks()
    registerTransportBenchmarks()
    registerAllocationBenchmarks()
    registerStoreBenchmarks()
    registerStoreCatchUpBenchmarks()
    registerSendingBenchmarks()
}
