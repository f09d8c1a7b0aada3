extension MeshKey {
    /// The mesh tag (SPEC.md §16.1): 16 bytes that nodes holding this key compute alike and
    /// advertise on the LAN to recognise each other, without showing the key: the first 16
    /// bytes of HMAC-BLAKE2b under the key of the ASCII text `weft mesh tag v1`.
    public var tag: [UInt8] {
        BLAKE2b.hmac(key: secret, Array("weft mesh tag v1".utf8)).withUnsafeBytes { Array($0.prefix(16)) }
    }
}
