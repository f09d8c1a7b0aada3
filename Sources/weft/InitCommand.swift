import ArgumentParser
import Foundation
import WeftCrypto
import WeftNode

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a node home: a sealed identity, a display name and a mesh key."
    )

    @OptionGroup var home: HomeOptions

    @Option(help: "The display name peers see.")
    var name: String

    @Flag(help: "Create a new mesh key (the first node of a mesh).")
    var newMesh = false

    @Option(help: "Join an existing mesh: the mesh key file of one of its nodes.")
    var meshKeyFile: String?

    @Option(help: "Read the passphrase from this file (else $WEFT_PASSPHRASE, else a prompt).")
    var passphraseFile: String?

    @Flag(help: "Store the identity key unprotected (tests and throwaway nodes only).")
    var noPassphrase = false

    func validate() throws {
        guard newMesh != (meshKeyFile != nil) else {
            throw ValidationError("Choose exactly one of --new-mesh and --mesh-key-file.")
        }
        guard !(noPassphrase && passphraseFile != nil) else {
            throw ValidationError("--no-passphrase and --passphrase-file contradict each other.")
        }
        guard !name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, name.utf8.count <= 64 else {
            throw ValidationError("The display name must be 1 to 64 bytes of UTF-8.")
        }
    }

    func run() throws {
        let nodeHome = home.nodeHome
        if nodeHome.exists { throw CLIError("\(nodeHome.identityFile.path) already holds a Weft identity; refusing to overwrite it.") }
        let meshKey = try meshKeyFile.map { try NodeHome.readMeshKey(at: URL(fileURLWithPath: $0)) } ?? MeshKey.generate()
        let protection: SealedIdentity.Protection
        if noPassphrase {
            warn("the identity key is stored UNPROTECTED in \(nodeHome.identityFile.path): anyone who can read the file can impersonate this node.")
            protection = .none
        } else {
            protection = .passphrase(try PassphraseSource.read(file: passphraseFile, confirm: true))
        }
        let identity = try nodeHome.create(displayName: name, meshKey: meshKey, protection: protection)
        say("created \(nodeHome.directory.path)")
        say("user id: \(identity.publicKey)")
        say("mesh key: \(nodeHome.meshKeyFile.path)\(newMesh ? " (new mesh; give this file to the other nodes with --mesh-key-file)" : "")")
    }
}

struct IdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "id",
        abstract: "Print the node's user identifier (no passphrase needed)."
    )

    @OptionGroup var home: HomeOptions

    func run() throws {
        say(try home.nodeHome.publicIdentity().description)
    }
}
