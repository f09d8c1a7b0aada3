import Foundation
import Synchronization

/// Directories the store fixtures make for their databases, removed by the target's teardown
/// hook (`Benchmark.teardown`): the benchmark process ends without deinitialising fixtures,
/// which left a store of tens of MB in /tmp per benchmark run.
enum ScratchDirectories {
    private static let made = Mutex<[URL]>([])

    /// A new directory path under the temporary directory, named `prefix-UUID` (not created).
    static func make(_ prefix: String) -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        made.withLock { $0.append(url) }
        return url
    }

    static func removeAll() {
        for url in made.withLock({ made in defer { made = [] }; return made }) {
            try? FileManager.default.removeItem(at: url)
        }
    }
}
