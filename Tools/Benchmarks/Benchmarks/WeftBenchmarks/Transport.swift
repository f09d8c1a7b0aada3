import Benchmark
import NIOCore
import WeftCrypto
import WeftWire

/// Sealing and framing throughput for 64 KiB data frames, in memory, with buffers reused.
///
/// Throughput is in frames per second; each frame carries 64 KiB of payload, so
/// MB/s = throughput x 65,536 / 1,000,000. The baseline is libsodium's ChaCha20-Poly1305 alone,
/// through `CipherState.seal(inPlace:)` on a 64 KiB buffer: the codec cannot beat it.
func registerTransportBenchmarks() {
    // One frame per iteration: a 64 KiB frame takes tens of microseconds, so the clock reads
    // around each iteration cost little. Allocations are counted in the Alloc benchmarks, which
    // keeps the malloc statistics' overhead out of these timings.
    let configuration = Benchmark.Configuration(
        metrics: [.throughput, .wallClock],
        timeUnits: .nanoseconds,
        maxDuration: .seconds(2)
    )

    // MARK: - Baseline: the AEAD alone

    Benchmark("Transport: ChaCha20-Poly1305 seal 64 KiB (baseline)", configuration: configuration) { benchmark in
        let cipher = CipherState(key: SecureBytes.random(count: CipherState.keyByteCount))
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: largePayloadByteCount + CipherState.tagByteCount, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0x5a)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            do {
                try cipher.seal(inPlace: buffer, plaintextByteCount: largePayloadByteCount)
            } catch {
                benchmark.error("seal failed: \(error)")
            }
        }
        benchmark.stopMeasurement()
        blackHole(buffer)
    }

    // MARK: - TransportCodec

    let payload = makePayload(largePayloadByteCount)

    Benchmark("Transport: codec seal 64 KiB", configuration: configuration) { benchmark in
        var (sender, _) = makeCodecPair()
        var wire = ByteBuffer()
        wire.reserveCapacity(largePayloadByteCount + 64)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            do {
                try sender.seal(.data(payload), into: &wire)
            } catch {
                benchmark.error("seal failed: \(error)")
            }
            blackHole(wire.readableBytes)
            wire.clear()
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Transport: codec open 64 KiB", configuration: configuration) { benchmark in
        var (sender, receiver) = makeCodecPair()
        var wire = ByteBuffer()
        wire.reserveCapacity(benchmark.scaledIterations.count * (largePayloadByteCount + 64))
        // Records must be opened in nonce order, and opening decrypts in place, so each
        // iteration seals fresh ones first, outside the measurement.
        do {
            for _ in benchmark.scaledIterations { try sender.seal(.data(payload), into: &wire) }
        } catch {
            benchmark.error("seal failed: \(error)")
        }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            openOne(&receiver, from: &wire, benchmark: benchmark)
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Transport: codec seal + open 64 KiB", configuration: configuration) { benchmark in
        var (sender, receiver) = makeCodecPair()
        var wire = ByteBuffer()
        wire.reserveCapacity(largePayloadByteCount + 64)
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
}

/// Opens one data record; the frame (a slice of `wire`) is dropped before returning, so the
/// caller's `clear()` finds the buffer uniquely referenced and reuses it.
@inline(never)
func openOne(_ codec: inout TransportCodec, from wire: inout ByteBuffer, benchmark: Benchmark) {
    do {
        guard case .data(let bytes) = try codec.open(from: &wire) else {
            benchmark.error("expected a data frame")
            return
        }
        blackHole(bytes.readableBytes)
    } catch {
        benchmark.error("open failed: \(error)")
    }
}
