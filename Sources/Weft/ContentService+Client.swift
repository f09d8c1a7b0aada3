import Foundation
import WeftControl
import WeftModel
import WeftNode

// The node's content service as the client and the control protocol use it: it keeps what
// the local user sends, and fetches, reports and copies out what others send.

extension ContentService: ContentImporter {}

extension ContentService: ContentDownloads {
    public func download(
        _ descriptor: ContentDescriptor, mimeType: String, to path: String, _ emit: @escaping @Sendable (DownloadProgress) async throws -> Void
    ) async throws {
        let root = descriptor.root
        if contentFile(root) == nil { await download(descriptor, mimeType: mimeType) }
        // What is known now, then each change, until the content is whole or failed.
        for await progress in self.progress(of: root) {
            let status = self.status(of: root)
            try await emit(DownloadProgress(progress, status: status))
            if case .failed(let reason) = status { throw ControlFailure(.internalError, "The download failed: \(reason).") }
        }
        guard let file = contentFile(root) else {
            let status = self.status(of: root)
            throw ControlFailure(.internalError, "The download of \(root.hex.prefix(16)) ended without the whole content (\(status)).")
        }
        if !path.isEmpty { try Self.copy(file, to: path) }
    }

    public func state(of descriptor: ContentDescriptor, sentByLocalUser: Bool) -> MessageRecord.ContentState {
        let status = self.status(of: descriptor.root)
        let verified: UInt64 =
            switch status {
            case .complete, .awaitingUpload, .uploading: descriptor.byteCount
            default: min(currentProgress(of: descriptor.root)?.verifiedBytes ?? 0, descriptor.byteCount)
            }
        let (code, reason) = DownloadProgress.code(of: status)
        return MessageRecord.ContentState(root: descriptor.root.bytes, status: code, verifiedBytes: verified, reason: reason)
    }

    public var counters: [ReplicationCounter] {
        let counts = statistics
        return [
            ("chunksServed", counts.chunksServed), ("chunksReceived", counts.chunksReceived), ("chunksVerified", counts.chunksVerified),
            ("corruptChunks", counts.corruptChunks), ("chunksIgnored", counts.chunksIgnored), ("manifestsServed", counts.manifestsServed),
            ("framesEncoded", counts.framesEncoded),
            ("contentRequestsDropped", counts.requestsDropped), ("downloadsCompleted", counts.downloadsCompleted),
        ].map { ReplicationCounter(name: $0.0, value: UInt64(clamping: $0.1)) }
    }

    /// `file` copied to `path` through a temporary file renamed over it (by the kernel,
    /// `sendfile`, where it can: no pass through this process's memory).
    static func copy(_ file: URL, to path: String) throws(ControlFailure) {
        let target = URL(fileURLWithPath: path)
        let temporary = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).weft-download")
        do {
            try? FileManager.default.removeItem(at: temporary)
            if !kernelCopy(file.path, to: temporary.path) {
                try? FileManager.default.removeItem(at: temporary)
                try FileManager.default.copyItem(at: file, to: temporary)
            }
            // The content file is read-only in the store; the copy is the user's.
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: temporary.path)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw ControlFailure(.storageFailed, "Cannot write \(path): \(error.localizedDescription)")
        }
        guard rename(temporary.path, target.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw ControlFailure(.storageFailed, "Cannot write \(path): \(reason).")
        }
    }
}

/// Copies `source` to a new file `target` with `sendfile` (a copy inside the kernel); false
/// (leaving whatever it wrote, for the caller to remove) where the kernel or file system cannot.
private func kernelCopy(_ source: String, to target: String) -> Bool {
    let input = open(source, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { return false }
    defer { close(input) }
    let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard output >= 0 else { return false }
    defer { close(output) }
    var info = stat()
    guard fstat(input, &info) == 0 else { return false }
    var left = Int(info.st_size)
    while left > 0 {
        let copied = sendfile(output, input, nil, min(left, 1 << 30))
        if copied < 0 && errno == EINTR { continue }
        guard copied > 0 else { return false }
        left -= copied
    }
    return true
}

extension DownloadProgress {
    init(_ progress: ContentProgress, status: ContentTransferStatus) {
        let (code, reason) = Self.code(of: status)
        self.init(
            verifiedBytes: min(progress.verifiedBytes, progress.totalBytes), totalBytes: progress.totalBytes, wireBytes: progress.wireBytes,
            bytesPerSecond: UInt64(max(0, progress.bytesPerSecond)), status: code, reason: reason)
    }

    /// The control protocol's status code and reason for a transfer status.
    static func code(of status: ContentTransferStatus) -> (ContentStatus, String) {
        switch status {
        case .awaitingUpload: (.awaitingUpload, "")
        case .uploading: (.uploading, "")
        case .readyForDownload: (.readyForDownload, "")
        case .downloading: (.downloading, "")
        case .complete: (.complete, "")
        case .paused(let reason): (.paused, reason)
        case .failed(let reason): (.failed, reason)
        }
    }
}
