import Foundation
import NIOPosix
import WeftControl
import WeftModel
import WeftNode
import WeftStore

// The node's content service as the client and the control protocol use it: it keeps what
// the local user sends, and fetches, reports and copies out what others send.

extension ContentService: ContentImporter {}

extension ContentService: ContentDownloads {
    public func download(
        _ descriptor: ContentDescriptor, mimeType: String, to path: String, _ emit: @escaping @Sendable (DownloadProgress) async throws -> Void
    ) async throws {
        let root = descriptor.root
        // The copy for `path` is made as chunks are verified, beside the download, so that
        // little of it is left to make once the content is whole.
        let export = path.isEmpty ? nil : try await startExport(of: descriptor, to: path)
        do {
            if contentFile(root) == nil { await download(descriptor, mimeType: mimeType) }
            // What is known now, then each change, until the content is whole or failed.
            for await progress in self.progress(of: root) {
                let status = self.status(of: root)
                try await emit(DownloadProgress(progress, status: status))
                if case .failed(let reason) = status { throw ControlFailure(.internalError, "The download failed: \(reason).") }
                if let export { try await exporting(to: path) { try export.copyVerified() } }
            }
            guard contentFile(root) != nil else {
                let status = self.status(of: root)
                throw ControlFailure(.internalError, "The download of \(root.hex.prefix(16)) ended without the whole content (\(status)).")
            }
            if let export { try await exporting(to: path) { try export.finish() } }
        } catch {
            export?.abandon()
            throw error
        }
    }

    /// The copy of the content for `path` (see `ContentExport`), its temporary file made.
    private func startExport(of descriptor: ContentDescriptor, to path: String) async throws -> ContentExport {
        try await exporting(to: path) {
            let layout = try ContentStore.Layout(totalSize: descriptor.byteCount, chunkLog: descriptor.chunkLog)
            return try ContentExport(try ContentStore.Root(descriptor.root.bytes), layout: layout, from: self.contentStore, to: path)
        }
    }

    /// Runs a step of the copy for `path` on NIO's thread pool (it blocks on the disk); a
    /// failure is the client's "cannot write" one.
    private func exporting<T: Sendable>(to path: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await NIOThreadPool.singleton.runIfActive(body)
        } catch let error as ContentStoreError {
            throw ControlFailure(.storageFailed, "Cannot write \(path): \(error.message)")
        }
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
