#!/usr/bin/env python3
"""Writes Protocol/vectors/content-transfer.json from SPEC.md §17.8 alone (struct packing by hand,
not the Swift code). The content, its manifest and a chunk message are those of content.json
(written from §17.1-§17.6 by content-vectors.py); run that one first."""
import hashlib, json, os, struct

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "Protocol", "vectors")
MAX_CHUNKS, MAX_LIST = 16384, 256

TYPES = {
    "HOLDINGS REQUEST": 0x0A, "HOLDINGS": 0x0B, "MANIFEST REQUEST": 0x0C, "MANIFEST": 0x0D,
    "CHUNK REQUEST": 0x0E, "CHUNK": 0x0F, "NOT HELD": 0x10, "CANCEL": 0x11,
}


def u8(v): return struct.pack(">B", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)


content = json.load(open(os.path.join(VECTORS, "content.json")))["content"]
root = bytes.fromhex(content["root"])
manifest = bytes.fromhex(content["manifestHex"])
chunk_message = bytes.fromhex(content["lastChunkMessageHex"])
chunk_count = content["chunkCount"]


def bitmap(count, chunks):
    """§17.8: chunk i is bit i mod 8 (the least significant first) of byte i div 8."""
    out = bytearray((count + 7) // 8)
    for i in chunks:
        out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def holdings(kind, count=None, chunks=()):
    body = root + u8(kind)
    if kind == 2:
        body += u32(count) + bitmap(count, chunks)
    return body


def chunk_list(chunks):
    return root + u16(len(chunks)) + b"".join(u32(c) for c in chunks)


messages = []


def message(description, name, body, fields):
    payload = u8(TYPES[name]) + body
    messages.append({
        "description": description, "type": name, "typeByte": TYPES[name], "hex": payload.hex(),
        "fields": dict(root=root.hex(), **fields),
    })


message("HOLDINGS REQUEST: which chunks of the content.json content do you hold?", "HOLDINGS REQUEST", root, {})
message("HOLDINGS: none", "HOLDINGS", holdings(0), {"holdings": "none"})
message("HOLDINGS: all, the content is complete", "HOLDINGS", holdings(1), {"holdings": "all"})
message("HOLDINGS: chunks 0, 2 and 4 of five (bitmap 0x15, least significant bit first)", "HOLDINGS",
        holdings(2, chunk_count, [0, 2, 4]), {"holdings": "chunks", "chunkCount": chunk_count, "chunks": [0, 2, 4]})
message("HOLDINGS: chunk 8 of nine, in the second bitmap byte", "HOLDINGS",
        holdings(2, 9, [8]), {"holdings": "chunks", "chunkCount": 9, "chunks": [8]})
message("HOLDINGS: a bitset of 16,384 chunks with none set", "HOLDINGS",
        holdings(2, MAX_CHUNKS, []), {"holdings": "chunks", "chunkCount": MAX_CHUNKS, "chunks": []})
message("MANIFEST REQUEST", "MANIFEST REQUEST", root, {})
message("MANIFEST: not held", "MANIFEST", root + u8(0), {"held": False})
message("MANIFEST: the content.json manifest (§17.4)", "MANIFEST", root + u8(1) + manifest,
        {"held": True, "manifestHex": manifest.hex()})
message("CHUNK REQUEST: chunks 0, 3 and 4", "CHUNK REQUEST", chunk_list([0, 3, 4]), {"chunks": [0, 3, 4]})
message("CHUNK: the last chunk of the content.json content, raw (§17.6)", "CHUNK", chunk_message,
        {"index": chunk_count - 1, "frameHex": chunk_message[36:].hex()})
message("NOT HELD: chunk 1", "NOT HELD", chunk_list([1]), {"chunks": [1]})
message("CANCEL: chunks 2 and 16383, the last index a content may have", "CANCEL", chunk_list([2, 16383]),
        {"chunks": [2, 16383]})
message("CHUNK REQUEST: 256 chunks, the most one list holds", "CHUNK REQUEST", chunk_list(list(range(0, 512, 2))),
        {"chunks": list(range(0, 512, 2))})

invalid = []


def refuse(description, name, body, error):
    invalid.append({"description": description, "hex": (u8(TYPES[name]) + body).hex(), "error": error, "errorCode": 6})


# A manifest of another content: the content.json manifest with its root's last byte changed
# in the descriptor (so its hashes no longer make its root).
tampered = bytearray(manifest)
tampered[9 + 31] ^= 0x01
other_root = bytes(tampered[9:41])

refuse("HOLDINGS REQUEST of 31 bytes", "HOLDINGS REQUEST", root[:31], "truncated")
refuse("HOLDINGS REQUEST with a byte after the root", "HOLDINGS REQUEST", root + b"\x00", "trailingBytes")
refuse("MANIFEST REQUEST with no body", "MANIFEST REQUEST", b"", "truncated")
refuse("HOLDINGS ending after its root", "HOLDINGS", root, "truncated")
refuse("HOLDINGS of kind 3", "HOLDINGS", root + u8(3), "invalidBody")
refuse("HOLDINGS none followed by a byte", "HOLDINGS", holdings(0) + b"\x00", "trailingBytes")
refuse("HOLDINGS all followed by a byte", "HOLDINGS", holdings(1) + b"\x01", "trailingBytes")
refuse("HOLDINGS bitset of 0 chunks", "HOLDINGS", root + u8(2) + u32(0), "invalidBody")
refuse("HOLDINGS bitset of 16,385 chunks, refused before the bytes left are looked at", "HOLDINGS",
       root + u8(2) + u32(MAX_CHUNKS + 1), "invalidBody")
refuse("HOLDINGS bitset of 4,294,967,295 chunks", "HOLDINGS", root + u8(2) + u32(0xFFFFFFFF), "invalidBody")
refuse("HOLDINGS bitset of five chunks without its bitmap byte", "HOLDINGS", root + u8(2) + u32(5), "truncated")
refuse("HOLDINGS bitset ending inside its count", "HOLDINGS", root + u8(2) + b"\x00\x00", "truncated")
refuse("HOLDINGS bitset of five chunks with bit 5 set", "HOLDINGS", root + u8(2) + u32(5) + b"\x20", "invalidBody")
refuse("HOLDINGS bitset of five chunks with two bitmap bytes", "HOLDINGS", root + u8(2) + u32(5) + b"\x01\x00", "trailingBytes")
refuse("MANIFEST ending after its root", "MANIFEST", root, "truncated")
refuse("MANIFEST held 2", "MANIFEST", root + u8(2) + manifest, "invalidBody")
refuse("MANIFEST not held, followed by a byte", "MANIFEST", root + u8(0) + b"\x00", "trailingBytes")
refuse("MANIFEST held with no manifest (malformed descriptor)", "MANIFEST", root + u8(1), "invalidBody")
refuse("MANIFEST held with the manifest cut inside its hashes (malformed manifest)", "MANIFEST",
       root + u8(1) + manifest[:-1], "invalidBody")
refuse("MANIFEST held with a byte after the manifest (malformed manifest)", "MANIFEST",
       root + u8(1) + manifest + b"\x00", "invalidBody")
refuse("MANIFEST held whose hashes make another root than its descriptor's (root mismatch)", "MANIFEST",
       other_root + u8(1) + bytes(tampered), "invalidBody")
refuse("MANIFEST held for content X carrying a valid manifest of another content", "MANIFEST",
       other_root + u8(1) + manifest, "invalidBody")
refuse("CHUNK REQUEST of no chunks", "CHUNK REQUEST", chunk_list([]), "invalidBody")
refuse("CHUNK REQUEST counting 257 chunks, refused before the bytes left are looked at", "CHUNK REQUEST",
       root + u16(257), "invalidBody")
refuse("CHUNK REQUEST counting two chunks holding one", "CHUNK REQUEST", root + u16(2) + u32(0), "truncated")
refuse("CHUNK REQUEST ending inside its count", "CHUNK REQUEST", root + b"\x00", "truncated")
refuse("CHUNK REQUEST with chunk 3 twice", "CHUNK REQUEST", chunk_list([3, 3]), "invalidBody")
refuse("CHUNK REQUEST not ascending", "CHUNK REQUEST", chunk_list([4, 2]), "invalidBody")
refuse("CHUNK REQUEST for chunk 16384, past any content", "CHUNK REQUEST", chunk_list([16384]), "invalidBody")
refuse("NOT HELD with a byte after its list", "NOT HELD", chunk_list([1]) + b"\x00", "trailingBytes")
refuse("CANCEL of no chunks", "CANCEL", chunk_list([]), "invalidBody")
refuse("CHUNK of 36 bytes: a root and an index, no flags byte", "CHUNK", chunk_message[:36], "truncated")

vectors = {
    "description": (
        "Content-transfer sync messages (SPEC.md §17.8), written by Tools/content-transfer-vectors.py from the "
        "section alone. \"messages\" encode to \"hex\" (type byte and body) and \"hex\" decodes to their \"fields\": "
        "every message's \"root\"; HOLDINGS \"holdings\" (none, all or chunks, with \"chunkCount\" and the \"chunks\" "
        "held); MANIFEST \"held\" and \"manifestHex\"; CHUNK REQUEST, NOT HELD and CANCEL \"chunks\"; CHUNK \"index\" "
        "and \"frameHex\". The content is that of content.json. \"invalid\" payloads are refused with \"error\" "
        "(truncated, trailingBytes, invalidBody) and ERROR \"errorCode\"."
    ),
    "limits": {"maxChunkListCount": MAX_LIST, "maxHoldingsChunkCount": MAX_CHUNKS},
    "messages": messages,
    "invalid": invalid,
}
with open(os.path.join(VECTORS, "content-transfer.json"), "w") as f:
    json.dump(vectors, f, indent=2)
    f.write("\n")
