// The types LocalMesh's API names (identifiers, records, statuses, control failures, addresses), so that a
// test that imports WeftTestKit alone can name them: a user's package need not know which of
// Weft's modules each comes from.
@_exported import WeftControl
@_exported import WeftCrypto
@_exported import WeftModel
@_exported import struct WeftNode.PeerAddress
