// What Weft's API names, so that `import Weft` is enough to use it: identifiers and values
// (WeftModel), addresses for `LocalNode.Options`, the passphrase's bytes, and rich content.
@_exported import WeftModel
@_exported import struct WeftCrypto.SecureBytes
@_exported import struct WeftNode.PeerAddress
@_exported import class WeftNode.ContentService
@_exported import struct WeftNode.ContentConfiguration
@_exported import enum WeftNode.ContentTransferStatus
@_exported import struct WeftNode.ContentProgress
@_exported import struct WeftNode.ContentServiceError
@_exported import struct WeftNode.MediaTypePattern
