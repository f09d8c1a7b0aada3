import Foundation
import WeftCrypto

/// A node's home directory (SPEC.md "Node home"): the sealed identity, the mesh key and the
/// display name, each in its own file with mode 0600.
public struct NodeHome: Sendable {
    public let directory: URL

    public var identityFile: URL { directory.appendingPathComponent("identity.key") }
    public var meshKeyFile: URL { directory.appendingPathComponent("mesh.key") }
    public var displayNameFile: URL { directory.appendingPathComponent("display-name") }

    public init(directory: URL) {
        self.directory = directory
    }

    /// `--home` if given, else `$WEFT_HOME`, else `~/.weft` (SPEC.md §11), where `~` is
    /// `$HOME` when set and not empty, else the account's home directory.
    /// - Parameter environment: looks up a variable; tests pass their own.
    public static func resolve(
        _ explicit: String?, environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }
    ) -> NodeHome {
        if let explicit { return NodeHome(directory: URL(fileURLWithPath: explicit)) }
        if let fromEnvironment = environment("WEFT_HOME"), !fromEnvironment.isEmpty {
            return NodeHome(directory: URL(fileURLWithPath: fromEnvironment))
        }
        return NodeHome(directory: URL(fileURLWithPath: userHome(environment: environment)).appendingPathComponent(".weft"))
    }

    /// `$HOME` as shells and most tools read it (so a user or a test can redirect it), else
    /// the account's entry in the password database.
    static func userHome(environment: (String) -> String?) -> String {
        if let home = environment("HOME"), !home.isEmpty { return home }
        if let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir { return String(cString: directory) }
        return FileManager.default.homeDirectoryForCurrentUser.path
    }

    public var exists: Bool { FileManager.default.fileExists(atPath: identityFile.path) }

    // MARK: - Creating

    /// Creates the home: the mesh key, the name, and last a new identity sealed with
    /// `protection`. Refuses to overwrite an existing identity.
    ///
    /// The identity is the file that makes a home initialized (`exists`), and it is written
    /// last, each file durably before the next: a crash at any moment leaves either a complete
    /// home or one without an identity, which every command reports as not initialized and
    /// `create` completes, overwriting the other files.
    @discardableResult
    public func create(
        displayName: String, meshKey: MeshKey, protection: SealedIdentity.Protection
    ) throws(NodeHomeError) -> NodeIdentity {
        guard !exists else { throw .alreadyInitialized(identityFile.path) }
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .io("cannot create \(directory.path): \(error.localizedDescription)")
        }
        let identity = NodeIdentity.generate()
        try write(Array(meshKey.fileContents().utf8), to: meshKeyFile)
        try write(Array((displayName + "\n").utf8), to: displayNameFile)
        try write(SealedIdentity.seal(identity, protection: protection), to: identityFile)
        return identity
    }

    /// Writes a file durably and atomically (SPEC.md §11): a temporary file created with
    /// `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600 (never world-readable, never through a planted
    /// symbolic link), written, `fsync`ed, renamed over the target, then the directory
    /// `fsync`ed so the rename itself survives a power loss. A crash leaves the old file or
    /// the new one, and perhaps a stale temporary file, which the next write replaces.
    func write(_ bytes: [UInt8], to url: URL) throws(NodeHomeError) {
        let temporary = url.path + ".tmp"
        // A temporary file left by a crash is ours to replace; unlink never follows a link.
        if unlink(temporary) != 0 && errno != ENOENT {
            throw .io("cannot remove the stale \(temporary): \(String(cString: strerror(errno)))")
        }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            written += count
        }
        let synced = written == bytes.count && fsync(fd) == 0
        let failure = errno
        close(fd)
        guard synced, rename(temporary, url.path) == 0 else {
            let reason = String(cString: strerror(synced ? errno : failure))
            unlink(temporary)
            throw .io("cannot write \(url.path): \(reason)")
        }
        try syncDirectory()
    }

    /// Makes the directory's entries (a rename) durable.
    private func syncDirectory() throws(NodeHomeError) {
        let fd = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io("cannot open \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .io("cannot sync \(directory.path): \(String(cString: strerror(errno)))") }
    }

    // MARK: - Reading

    /// The identity file's bytes.
    public func identityFileBytes() throws(NodeHomeError) -> [UInt8] {
        guard exists else { throw .notInitialized(directory.path) }
        guard let data = FileManager.default.contents(atPath: identityFile.path) else {
            throw .io("cannot read \(identityFile.path)")
        }
        return [UInt8](data)
    }

    /// The public identity, read without the passphrase.
    public func publicIdentity() throws(NodeHomeError) -> PublicIdentity {
        let file = try identityFileBytes()
        do {
            return try SealedIdentity.publicIdentity(of: file)
        } catch {
            throw .damagedIdentity(identityFile.path, error.description)
        }
    }

    /// Whether the identity needs a passphrase to open.
    public func identityIsProtected() throws(NodeHomeError) -> Bool {
        let file = try identityFileBytes()
        do {
            return try SealedIdentity.isProtected(file)
        } catch {
            throw .damagedIdentity(identityFile.path, error.description)
        }
    }

    /// Opens the identity. The file is only read, never rewritten.
    public func openIdentity(passphrase: SecureBytes?) throws(NodeHomeError) -> NodeIdentity {
        let file = try identityFileBytes()
        do {
            return try SealedIdentity.open(file, passphrase: passphrase)
        } catch where error == .wrongPassphrase {
            throw .wrongPassphrase(identityFile.path)
        } catch where error == .keyDerivationFailed {
            throw .io("cannot derive the key for \(identityFile.path): \(error)")
        } catch {
            throw .damagedIdentity(identityFile.path, error.description)
        }
    }

    public func meshKey() throws(NodeHomeError) -> MeshKey {
        try Self.readMeshKey(at: meshKeyFile)
    }

    /// Reads a mesh key file (the home's, or one given with `--mesh-key-file`).
    public static func readMeshKey(at url: URL) throws(NodeHomeError) -> MeshKey {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw .io("cannot read the mesh key file \(url.path)")
        }
        do {
            return try MeshKey(fileContents: String(decoding: data, as: UTF8.self))
        } catch {
            throw .damagedMeshKey(url.path, error.description)
        }
    }

    public func displayName() -> String {
        guard let data = FileManager.default.contents(atPath: displayNameFile.path) else { return "" }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Problems with a node home, each one sentence a person can act on.
public struct NodeHomeError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case alreadyInitialized, notInitialized, wrongPassphrase, damagedIdentity, damagedMeshKey, io, locked
    }

    public let kind: Kind
    public let description: String

    static func alreadyInitialized(_ path: String) -> Self {
        Self(kind: .alreadyInitialized, description: "\(path) already holds a Weft identity; refusing to overwrite it.")
    }
    static func notInitialized(_ path: String) -> Self {
        Self(kind: .notInitialized, description: "\(path) holds no Weft identity (none was created, or `weft init` was interrupted); create one with `weft init`.")
    }
    static func wrongPassphrase(_ path: String) -> Self {
        Self(kind: .wrongPassphrase, description: "The passphrase does not open the identity in \(path).")
    }
    static func damagedIdentity(_ path: String, _ why: String) -> Self {
        Self(kind: .damagedIdentity, description: "The identity file \(path) is damaged (\(why.replacingOccurrences(of: "the file is damaged: ", with: ""))).")
    }
    static func damagedMeshKey(_ path: String, _ why: String) -> Self {
        Self(kind: .damagedMeshKey, description: "The mesh key file \(path) is damaged (\(why.replacingOccurrences(of: "the file is damaged: ", with: ""))).")
    }
    static func io(_ what: String) -> Self {
        Self(kind: .io, description: what.prefix(1).uppercased() + what.dropFirst() + ".")
    }
}
