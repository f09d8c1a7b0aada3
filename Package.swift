// swift-tools-version:6.1
import PackageDescription

/// Weft: a peer-to-peer messaging mesh node.
///
/// Imports run one way (../shared/DESIGN.md):
///
///     C libraries (CSodium, CZstd), WeftBytes (big-endian field primitives on ByteBuffer,
///                                            `package` access, shared by every codec)
///       <- WeftCrypto, WeftCompression
///       <- WeftWire (frames, connection state machine), WeftModel (operations, merge rules)
///       <- WeftStore (SQLite through GRDB), WeftTransfer (sans-I/O rich content: descriptors'
///          manifests, the hash tree, chunk frames, the transfer scheduler)
///       <- WeftSync (sans-I/O replication: sync messages, the content-transfer ones included)
///       <- WeftControl (the control protocol between the CLI and a running node: frames,
///                       requests, the ControlHandler a daemon implements; no sockets)
///       <- WeftDiscovery (sans-I/O multicast DNS: the packet codec, what a node advertises)
///       <- WeftNode (SwiftNIO edge: listener, dialers, one session per peer; serves a Store;
///                    the control socket's server and client; LAN discovery's mDNS sockets)
///       <- Weft (the client API)
///       <- weft (the CLI), WeftTestKit (LocalMesh: `weft node` processes driven through
///                                          their control sockets)
///
/// WeftStore and WeftSync sit side by side: the sync core decides what to send from events
/// and never touches the database; the node carries out its actions against the store.
let package = Package(
    name: "weft",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WeftCrypto", targets: ["WeftCrypto"]),
        .library(name: "WeftCompression", targets: ["WeftCompression"]),
        .library(name: "WeftWire", targets: ["WeftWire"]),
        .library(name: "WeftModel", targets: ["WeftModel"]),
        .library(name: "WeftStore", targets: ["WeftStore"]),
        .library(name: "WeftSync", targets: ["WeftSync"]),
        .library(name: "WeftTransfer", targets: ["WeftTransfer"]),
        .library(name: "WeftControl", targets: ["WeftControl"]),
        .library(name: "WeftDiscovery", targets: ["WeftDiscovery"]),
        .library(name: "WeftNode", targets: ["WeftNode"]),
        .library(name: "Weft", targets: ["Weft"]),
        .library(name: "WeftTestKit", targets: ["WeftTestKit"]),
        .executable(name: "weft", targets: ["weft"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-async-algorithms.git", from: "1.1.4"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        // MARK: - C libraries (Debian: libsodium-dev, libzstd-dev; found through pkg-config)
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"])]
        ),
        // posix_spawn's close-from action (glibc), for SpawnedProcess.
        .systemLibrary(name: "CSpawn"),
        // copy_file_range (glibc), for ContentFile's copies inside the kernel.
        .systemLibrary(name: "CFileCopy"),

        // MARK: - Libraries
        .target(name: "WeftBytes", dependencies: [.product(name: "NIOCore", package: "swift-nio")]),
        .target(
            name: "WeftCrypto",
            dependencies: ["CSodium", "WeftBytes", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .target(name: "WeftCompression", dependencies: ["CZstd"]),
        .target(
            name: "WeftModel",
            dependencies: ["WeftCrypto", "WeftBytes", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .target(
            name: "WeftStore",
            dependencies: [
                "WeftModel", "WeftCrypto", "CFileCopy", .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for binding the apply path's rows directly (DirectBindings.swift).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // Captures read for `weft dump`: pcap and pcapng files, IP, TCP reassembly (sans-I/O).
        .target(name: "WeftCapture"),
        .target(
            name: "WeftWire",
            dependencies: [
                "WeftCrypto",
                "WeftBytes",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .target(
            name: "WeftSync",
            // WeftTransfer for the content-transfer messages' manifests and chunks (§17.8).
            dependencies: ["WeftWire", "WeftModel", "WeftCompression", "WeftTransfer", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // weft dump's decoding: captured connections through the node's own decoders.
        .target(
            name: "WeftDump",
            dependencies: [
                "WeftCapture", "WeftWire", "WeftSync", "WeftModel", "WeftCrypto", "WeftTransfer", "WeftDiscovery", "WeftCompression",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        /// Rich content (SPEC.md §17): the chunking rule, the hash tree, manifests, chunk frames
        /// and chunk messages, and the scheduler that decides which chunk to ask which peer for
        /// (§17.7); no sockets, no files, no clock.
        .target(
            name: "WeftTransfer",
            dependencies: [
                "WeftModel", "WeftCrypto", "WeftCompression", .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        /// The control protocol between the CLI and a running node (SPEC.md §15): frames,
        /// requests, responses and the handler a daemon implements; no sockets.
        .target(
            name: "WeftControl",
            dependencies: ["WeftBytes", "WeftModel", "WeftCrypto", .product(name: "NIOCore", package: "swift-nio")]
        ),
        /// LAN discovery over multicast DNS (RFC 6762, DNS-SD RFC 6763): the packet codec and
        /// the responder's state; no sockets.
        .target(name: "WeftDiscovery", dependencies: ["WeftCrypto"]),
        .target(
            name: "WeftNode",
            dependencies: [
                "CSpawn",
                "WeftCrypto",
                "WeftControl",
                "WeftWire",
                "WeftStore",
                "WeftSync",
                "WeftTransfer",
                "WeftDiscovery",
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        .target(
            name: "Weft",
            dependencies: [
                "WeftModel", "WeftStore", "WeftCrypto", "WeftNode", "WeftControl",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        /// LocalMesh: real `weft node` processes on loopback for integration tests, driven
        /// through their control sockets. Runs the `weft` executable (built beside the tests).
        .target(
            name: "WeftTestKit",
            dependencies: ["WeftControl", "WeftNode", "WeftModel", "WeftCrypto"]
        ),

        // MARK: - The CLI
        .executableTarget(
            name: "weft",
            dependencies: [
                "Weft",
                "WeftControl",
                "WeftCrypto",
                "WeftModel",
                "WeftWire",
                "WeftNode",
                "WeftStore",
                "WeftDump",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // MARK: - Test helpers

        /// Writes batches to a store until killed: the store's crash test runs it (SIGKILL mid-write).
        .executableTarget(name: "weft-store-writer", dependencies: ["WeftStore", "WeftModel", "WeftCrypto"]),

        // MARK: - Tests
        .testTarget(name: "WeftBytesTests", dependencies: ["WeftBytes", .product(name: "NIOCore", package: "swift-nio")]),
        .testTarget(name: "WeftCryptoTests", dependencies: ["WeftCrypto"], exclude: ["Vectors"]),
        .testTarget(name: "WeftCompressionTests", dependencies: ["WeftCompression"]),
        .testTarget(
            name: "WeftDumpTests",
            dependencies: [
                "WeftDump", "WeftCapture", "WeftWire", "WeftCrypto", "WeftModel", "WeftSync", "WeftDiscovery", "WeftTransfer",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "WeftDiscoveryTests", dependencies: ["WeftDiscovery", "WeftCrypto"]),
        .testTarget(name: "WeftModelTests", dependencies: ["WeftModel", "WeftCrypto"]),
        .testTarget(
            name: "WeftStoreTests",
            dependencies: ["WeftStore", "WeftModel", "WeftCrypto", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "WeftTests",
            dependencies: ["Weft", "WeftStore", "WeftModel", "WeftCrypto", "WeftNode", "WeftWire", "WeftTransfer",
                .product(name: "Logging", package: "swift-log"), .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "WeftWireTests",
            dependencies: ["WeftWire", "WeftCrypto", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "WeftSyncTests",
            dependencies: [
                "WeftSync", "WeftWire", "WeftModel", "WeftCrypto", "WeftCompression", "WeftTransfer", .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "WeftTransferTests",
            dependencies: [
                "WeftTransfer", "WeftModel", "WeftCrypto", "WeftCompression", .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "WeftNodeTests",
            dependencies: [
                "WeftNode", "WeftWire", "WeftCrypto", "WeftStore", "WeftSync", "WeftTransfer", "WeftModel",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "WeftTestKitTests",
            // Runs the weft executable that `swift build --build-tests` builds beside it.
            dependencies: ["WeftTestKit", "WeftControl", "WeftModel", "WeftCrypto", "WeftNode", "WeftSync", "WeftWire", "WeftStore",
                "WeftTransfer", "WeftCompression",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "WeftCLITests",
            dependencies: [
                "WeftCrypto", "WeftControl", "WeftModel", "WeftNode", "WeftDiscovery", "WeftStore",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
