// swift-tools-version:6.1
import PackageDescription

/// Weft's benchmarks, in their own package so the main package never depends on the benchmark
/// library. Run them with `./Tools/bench` from the repository root.
let package = Package(
    name: "WeftBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "weft", path: "../.."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "WeftBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "WeftCrypto", package: "weft"),
                .product(name: "WeftWire", package: "weft"),
                .product(name: "WeftModel", package: "weft"),
                .product(name: "WeftStore", package: "weft"),
                .product(name: "Weft", package: "weft"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/WeftBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
        /// The mesh's end-to-end benchmarks: real `weft node` processes on loopback (the
        /// spread's through LocalMesh). Run it with
        /// `./Tools/bench-mesh` (it needs the release `weft` binary next to it).
        .executableTarget(
            name: "MeshBenchmarks",
            dependencies: [
                .product(name: "Weft", package: "weft"),
                .product(name: "WeftTestKit", package: "weft"),
                .product(name: "WeftNode", package: "weft"),
                .product(name: "WeftControl", package: "weft"),
                .product(name: "WeftStore", package: "weft"),
                .product(name: "WeftSync", package: "weft"),
                .product(name: "WeftModel", package: "weft"),
                .product(name: "WeftCrypto", package: "weft"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // Outside Benchmarks/: the benchmark plugin runs every executable there as one of its
            // own, and this one is not (it failed `./Tools/bench` with "benchmark job failed").
            path: "Mesh/MeshBenchmarks"
        ),
    ],
    swiftLanguageModes: [.v6]
)
