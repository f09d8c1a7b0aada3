// What Weft's API names, so that `import Weft` is enough to use it: identifiers and values
// (WeftModel), addresses for `LocalNode.Options`, and the passphrase's bytes.
@_exported import WeftModel
@_exported import struct WeftCrypto.SecureBytes
@_exported import struct WeftNode.PeerAddress
