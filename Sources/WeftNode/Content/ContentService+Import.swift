import Foundation
import NIOCore
import WeftModel
import WeftStore
import WeftTransfer

// Adding content this node's user sends (SPEC.md §11.2, §17.2–§17.4): read a few chunks at a
// time, each hashed into the manifest on every core at once, then written into the content
// store while the next chunks are read; so a file is read once and never held in memory whole.

extension ContentService {
    /// Adds the file's bytes as content of `mimeType` and returns its descriptor (for a
    /// message part: `MessagePart(mimeType:content:)`). The file is read a chunk at a time, on
    /// the thread pool. Adding content the node holds already changes nothing.
    /// - Throws: `ContentServiceError` (`.unsupportedSize` for an empty file or one over
    ///   8 GiB, `.unreadableFile`, `.storage` when the disk is full).
    public func importContent(file: URL, mimeType: String) async throws -> ContentDescriptor {
        let path = file.path
        return try await add(mimeType: mimeType) {
            let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw ContentServiceError(.unreadableFile, "Cannot open \(path): \(String(cString: strerror(errno))).")
            }
            var info = stat()
            guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                Glibc.close(descriptor)
                throw ContentServiceError(.unreadableFile, "\(path) is not a regular file.")
            }
            // Open until the reading is over (`add` calls the closer): closed any earlier, its
            // number could be given to the import file, and the reads would read that.
            return (UInt64(info.st_size), { buffer, offset in
                var done = 0
                while done < buffer.count, let base = buffer.baseAddress {
                    let count = pread(descriptor, base + done, buffer.count - done, off_t(offset + done))
                    if count < 0 {
                        if errno == EINTR { continue }
                        throw ContentServiceError(.unreadableFile, "Cannot read \(path): \(String(cString: strerror(errno))).")
                    }
                    guard count > 0 else {
                        throw ContentServiceError(.unreadableFile, "\(path) got shorter while it was read.")
                    }
                    done += count
                }
            }, { Glibc.close(descriptor) })
        }
    }

    /// Adds `bytes` as content of `mimeType` (see `importContent(file:mimeType:)`).
    public func importContent(bytes: [UInt8], mimeType: String) async throws -> ContentDescriptor {
        try await add(mimeType: mimeType) {
            (UInt64(bytes.count), { buffer, offset in
                bytes.withUnsafeBytes { source in
                    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<(offset + buffer.count)]))
                }
            }, {})
        }
    }

    /// Reads content of a known size a chunk at a time (`read(buffer, offset)` fills the
    /// buffer from that offset), writing it to an import file and hashing it; then keeps the
    /// manifest and names the content by its root.
    private func add(
        mimeType: String,
        _ source: @escaping @Sendable () throws -> (UInt64, (UnsafeMutableRawBufferPointer, Int) throws -> Void, () -> Void)
    ) async throws -> ContentDescriptor {
        let manifest: ContentManifest
        do {
            manifest = try await blocking {
                let (size, read, close) = try source()
                defer { close() }
                var builder: ContentManifestBuilder
                do throws(ContentError) {
                    builder = try ContentManifestBuilder(byteCount: size)
                } catch {
                    throw ContentServiceError(.unsupportedSize, "\(error.detail.prefix(1).uppercased())\(error.detail.dropFirst()).")
                }
                let importing = try self.contentStore.beginImport()
                try ImportPipeline().run(&builder, read: read, into: importing)
                let manifest = try builder.finish()
                let root = try ContentStore.Root(manifest.root.bytes)
                // The manifest first: content is served only with it (a manifest alone is harmless).
                try self.contentStore.writeManifest(Array(manifest.wire.readableBytesView), for: root)
                // Then the upload mark, before the name: content named without its mark would
                // count as uploaded after a crash. A mark whose content is missing goes at start.
                // Not for content the board follows as an upload already: marked, or sent whole.
                if !self.board.isUpload(manifest.root) { try self.pendingUploads.mark(manifest.root) }
                try importing.finish(as: root, layout: try Self.layout(of: manifest.descriptor))
                return manifest
            }
        } catch let error as ContentServiceError {
            throw error
        } catch let error as ContentStoreError {
            throw ContentServiceError(.storage, error.message)
        } catch is CancellationError {
            throw ContentServiceError(.stopped, "The content service stopped before the content was added.")
        } catch {
            throw ContentServiceError(.storage, "Cannot add the content: \(error).")
        }
        let descriptor = manifest.descriptor
        remember(mimeType: mimeType, of: descriptor.root)
        descriptors.withLock { descriptors in
            if descriptors.count >= Self.maxRemembered { descriptors.removeAll() }
            descriptors[descriptor.root] = descriptor
        }
        board.added(descriptor)
        // Any download of it is over (if the driver has no room, that download completes by
        // itself: the same bytes); peers that asked are told.
        events.offer(.imported(descriptor))
        holdMore(of: descriptor.root, isComplete: true)
        return descriptor
    }
}
