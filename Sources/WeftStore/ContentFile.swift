import CFileCopy
import Foundation

/// One open file of the content store (a partial file, a journal, a complete file), closed when
/// the last reference goes: a read in flight keeps the descriptor open (and never sees it
/// reused for another file) while the owner closes the content.
///
/// Every call blocks on the file system and turns a failure into a `ContentStoreError` naming
/// the call and the path (ENOSPC and EDQUOT as `.diskFull`).
final class ContentFile: Sendable {
    let descriptor: Int32
    let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { _ = Foundation.close(descriptor) }

    /// Opens `path` for reading and writing, creating it (mode 0600) if `create`; never through
    /// a symbolic link. Nil when the file does not exist and `create` is false.
    static func open(_ path: String, create: Bool) throws -> ContentFile? {
        let flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0)
        while true {
            let descriptor = Foundation.open(path, flags, 0o600)
            if descriptor >= 0 { return ContentFile(descriptor: descriptor, path: path) }
            let failure = errno
            if failure == EINTR { continue }
            if failure == ENOENT && !create { return nil }
            throw ContentFile.error("open", path, failure)
        }
    }

    /// Creates `path` afresh (mode 0600) for reading and writing: fails if it exists, and never
    /// follows a symbolic link.
    static func create(_ path: String) throws -> ContentFile {
        while true {
            let descriptor = Foundation.open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_CREAT | O_EXCL, 0o600)
            if descriptor >= 0 { return ContentFile(descriptor: descriptor, path: path) }
            let failure = errno
            if failure == EINTR { continue }
            throw ContentFile.error("create", path, failure)
        }
    }

    /// Opens `path` for reading only. Nil when the file does not exist.
    static func openForReading(_ path: String) throws -> ContentFile? {
        while true {
            let descriptor = Foundation.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            if descriptor >= 0 { return ContentFile(descriptor: descriptor, path: path) }
            let failure = errno
            if failure == EINTR { continue }
            if failure == ENOENT { return nil }
            throw ContentFile.error("open", path, failure)
        }
    }

    // MARK: - Reading and writing

    /// The file's size in bytes.
    func size() throws -> Int {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw ContentFile.error("stat", path, errno) }
        return Int(info.st_size)
    }

    /// `count` bytes from `offset`; a file that ends first is an error (the partial and
    /// complete files are sized to their content, so it was cut short by someone else).
    func read(count: Int, at offset: Int) throws -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: count) { bytes, initialized in
            try read(exactly: UnsafeMutableRawBufferPointer(bytes), at: offset)
            initialized = count
        }
    }

    /// Fills `buffer` from `offset`; throws if the file ends first.
    func read(exactly buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws {
        let read = try read(into: buffer, at: offset)
        guard read == buffer.count else {
            throw ContentStoreError(
                .fileSystem, "\(path) ends at byte \(offset + read), before the \(buffer.count) bytes read at \(offset); it was cut short.")
        }
    }

    /// Reads into `buffer` from `offset` until it is full or the file ends; the bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int {
        var done = 0
        while done < buffer.count, let base = buffer.baseAddress {
            let count = pread(descriptor, base + done, buffer.count - done, off_t(offset + done))
            if count < 0 {
                if errno == EINTR { continue }
                throw ContentFile.error("read", path, errno)
            }
            if count == 0 { break }
            done += count
        }
        return done
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws {
        var done = 0
        while done < bytes.count, let base = bytes.baseAddress {
            let count = pwrite(descriptor, base + done, bytes.count - done, off_t(offset + done))
            if count < 0 {
                if errno == EINTR { continue }
                throw ContentFile.error("write", path, errno)
            }
            // A regular file takes at least one byte or fails; zero would loop forever.
            guard count > 0 else { throw ContentFile.error("write", path, EIO) }
            done += count
        }
    }

    func write(_ bytes: [UInt8], at offset: Int) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// Copies `count` bytes from `offset` of this file to `output` at `outputOffset`, inside
    /// the kernel (`copy_file_range`: the bytes never pass through this process) where it can,
    /// else through a buffer. Throws if this file ends first.
    func copy(count: Int, from offset: Int, to output: ContentFile, at outputOffset: Int) throws {
        var done = 0
        while done < count {
            var input = off_t(offset + done), target = off_t(outputOffset + done)
            let copied = weft_copy_file_range(descriptor, &input, output.descriptor, &target, count - done)
            if copied > 0 {
                done += copied
                continue
            }
            if copied == 0 {
                throw ContentStoreError(.fileSystem, "\(path) ends at byte \(offset + done), before the \(count) bytes copied from \(offset).")
            }
            switch errno {
            case EINTR: continue
            // Files the kernel cannot copy between (other file systems, old kernels).
            case EXDEV, ENOSYS, EINVAL, EOPNOTSUPP:
                return try copyThroughBuffer(count: count - done, from: offset + done, to: output, at: outputOffset + done)
            case let failure: throw ContentFile.error("copy from", path, failure)
            }
        }
    }

    private func copyThroughBuffer(count: Int, from offset: Int, to output: ContentFile, at outputOffset: Int) throws {
        let step = min(count, 1 << 20)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: step, alignment: 16)
        defer { buffer.deallocate() }
        var done = 0
        while done < count {
            let part = UnsafeMutableRawBufferPointer(rebasing: buffer.prefix(min(step, count - done)))
            try read(exactly: part, at: offset + done)
            try output.write(UnsafeRawBufferPointer(part), at: outputOffset + done)
            done += part.count
        }
    }

    // MARK: - Size and durability

    /// Sets the size to `size` bytes, reserving the blocks (`posix_fallocate`) where the file
    /// system can, so writes inside it never find the disk full; elsewhere the file is sparse.
    func allocate(size: Int) throws {
        var result: Int32
        repeat { result = posix_fallocate(descriptor, 0, off_t(size)) } while result == EINTR
        switch result {
        case 0: break
        case ENOSPC, EDQUOT: throw ContentFile.error("allocate", path, result)
        default: break  // not supported here (EOPNOTSUPP, EINVAL): ftruncate sets the size
        }
        if try self.size() != size { try truncate(to: size) }
    }

    /// Cuts (or extends) the file to `size` bytes.
    func truncate(to size: Int) throws {
        while ftruncate(descriptor, off_t(size)) != 0 {
            if errno != EINTR { throw ContentFile.error("truncate", path, errno) }
        }
    }

    /// Makes the file's data (and the size needed to read it) durable: `fdatasync`.
    func syncData() throws {
        #if os(Linux)
        let result = fdatasync(descriptor)
        #else
        let result = fsync(descriptor)
        #endif
        guard result == 0 else { throw ContentFile.error("sync", path, errno) }
    }

    /// Lets the kernel drop those of the file's pages in the page cache that are on the disk
    /// already (`POSIX_FADV_DONTNEED`; pages written since stay). For a file written once and
    /// read seldom: its pages go back to be used again by the next writes, instead of every
    /// write taking memory the system has not touched, which costs most in a virtual machine.
    func dropCachedPages() {
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
    }

    /// Makes the file's data and metadata durable: `fsync`.
    func sync() throws {
        guard fsync(descriptor) == 0 else { throw ContentFile.error("sync", path, errno) }
    }

    /// Makes the file read-only (a complete file never changes).
    func makeReadOnly() throws {
        guard fchmod(descriptor, 0o400) == 0 else { throw ContentFile.error("chmod", path, errno) }
    }

    // MARK: - Directories and names

    /// Makes a directory's entries (created, renamed and removed names) durable.
    static func syncDirectory(_ path: String) throws {
        let descriptor = Foundation.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw error("open", path, errno) }
        defer { _ = Foundation.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw error("sync", path, errno) }
    }

    /// Whether a name exists (without following a symbolic link).
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Removes a name; false if there was none.
    @discardableResult
    static func remove(_ path: String) throws -> Bool {
        if unlink(path) == 0 { return true }
        if errno == ENOENT { return false }
        throw error("remove", path, errno)
    }

    static func rename(_ from: String, to: String) throws {
        guard Foundation.rename(from, to) == 0 else { throw error("rename", "\(from) to \(to)", errno) }
    }

    /// The store's error for a failed call: `.diskFull` for ENOSPC and EDQUOT, else
    /// `.fileSystem`, each one sentence naming the call, the path and the reason.
    static func error(_ call: String, _ path: String, _ code: Int32) -> ContentStoreError {
        let reason = String(cString: strerror(code))
        if code == ENOSPC || code == EDQUOT {
            return ContentStoreError(.diskFull, "The disk is full: cannot \(call) \(path) (\(reason)).")
        }
        return ContentStoreError(.fileSystem, "Cannot \(call) \(path): \(reason).")
    }
}
