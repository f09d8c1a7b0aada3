import Benchmark
import NIOCore
import WeftCrypto
import WeftWire

/// Allocations per data frame sent and received, for a 64-byte and a 64 KiB payload.
///
/// Two layers are measured apart, so a count can be traced to its source: the `TransportCodec`
/// alone with reused buffers (what a careful owner gets), and `ConnectionStateMachine.send` /
/// `receive` on an established pair (what the node gets). Run with `--allocation-stacks` to see
/// where each allocation comes from.
func registerAllocationBenchmarks() {
    let configuration = Benchmark.Configuration(
        metrics: [.mallocCountTotal, .throughput, .wallClock],
        maxDuration: .seconds(1)
    )
    let pair = MeshPair()

    for (label, byteCount) in [("64 B", smallPayloadByteCount), ("64 KiB", largePayloadByteCount)] {
        let payload = makePayload(byteCount)

        // MARK: - The codec alone, buffers reused

        Benchmark("Alloc: codec seal + open \(label)", configuration: configuration) { benchmark in
            var (sender, receiver) = makeCodecPair()
            var wire = ByteBuffer()
            wire.reserveCapacity(byteCount + 64)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                do {
                    try sender.seal(.data(payload), into: &wire)
                } catch {
                    benchmark.error("seal failed: \(error)")
                }
                openOne(&receiver, from: &wire, benchmark: benchmark)
                wire.clear()
            }
            benchmark.stopMeasurement()
        }

        // MARK: - The connection state machine

        // One established pair per benchmark, reused across iterations like a live connection.
        var sending = handshake(pair, drain: true)
        Benchmark("Alloc: connection send \(label)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(onlyWrite(sending.initiator.send(data: payload, now: benchmarkNow)))
            }
        }

        var receiving = handshake(pair, drain: true)
        Benchmark("Alloc: connection receive \(label)", configuration: configuration) { benchmark in
            // The record is sealed outside the measurement.
            let record = onlyWrite(receiving.initiator.send(data: payload, now: benchmarkNow))
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                blackHole(deliveredByteCount(receiving.responder.receive(record, now: benchmarkNow)))
            }
            benchmark.stopMeasurement()
        }

        var both = handshake(pair, drain: true)
        Benchmark("Alloc: connection send + receive \(label)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                let record = onlyWrite(both.initiator.send(data: payload, now: benchmarkNow))
                blackHole(deliveredByteCount(both.responder.receive(record, now: benchmarkNow)))
            }
        }
    }
}
