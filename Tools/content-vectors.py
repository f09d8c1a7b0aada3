#!/usr/bin/env python3
"""Writes Protocol/vectors/content.json from SPEC.md §17 alone (hashlib's BLAKE2b, struct packing
by hand, not the Swift code). Compressed frames come from the zstd command-line tool (apt: zstd);
compressed bytes are the encoder's choice, so tests check them by decoding only."""
import hashlib, json, os, struct, subprocess, tempfile

CHUNK_LOG_MIN, CHUNK_LOG_MAX, MAX_CHUNKS = 14, 19, 16384
LARGE_CHUNK_LOG = 19
MAX_BYTES = MAX_CHUNKS << CHUNK_LOG_MAX


def u8(v): return struct.pack(">B", v)
def u32(v): return struct.pack(">I", v)
def u64(v): return struct.pack(">Q", v)
def blake2b256(data): return hashlib.blake2b(data, digest_size=32).digest()
def leaf(chunk): return blake2b256(b"\x00" + chunk)
def inner(left, right): return blake2b256(b"\x01" + left + right)
def chunk_count(size, log): return -(-size // (1 << log))


def chunk_log(size):
    """§17.2, written from its prose: the smallest log in 14...19 whose chunk count is at most 16
    (19 if none); 19 never gives more than 16,384 chunks of content Weft holds (the second loop
    is kept from the rule's first form, and never runs)."""
    if size < 1 or size > MAX_BYTES:
        return None
    log = CHUNK_LOG_MIN
    while log < LARGE_CHUNK_LOG and chunk_count(size, log) > 16:
        log += 1
    while chunk_count(size, log) > MAX_CHUNKS:
        log += 1
    return log


def tree_levels(leaves):
    levels = [leaves]
    while len(levels[-1]) > 1:
        level, up = levels[-1], []
        for i in range(0, len(level) - 1, 2):
            up.append(inner(level[i], level[i + 1]))
        if len(level) % 2:
            up.append(level[-1])
        levels.append(up)
    return levels


def descriptor(size, log, root): return u64(size) + u8(log) + root
def manifest(desc, hashes): return desc + u32(len(hashes)) + b"".join(hashes)


def zstd(data, *options):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "chunk")
        with open(path, "wb") as f:
            f.write(data)
        return subprocess.run(["zstd", "-q", "-c", "--no-check", *options, path], check=True,
                              capture_output=True).stdout


def zstd_stdin(data, *options):
    return subprocess.run(["zstd", "-q", "-c", "--no-check", *options], input=data, check=True,
                          capture_output=True).stdout


# The content: numbered lines of ASCII text, cut at 70,000 bytes (five chunks of 2^14, the last
# 4,464 bytes).
SIZE = 70000
lines = "".join("%05d the quick brown fox jumps over the lazy dog; weft rich content\n" % i for i in range(2000))
text = lines[:SIZE]
content = text.encode()
assert len(content) == SIZE

log = chunk_log(SIZE)
count = chunk_count(SIZE, log)
chunks = [content[i << log:(i + 1) << log] for i in range(count)]
leaves = [leaf(c) for c in chunks]
levels = tree_levels(leaves)
root = levels[-1][0]
desc = descriptor(SIZE, log, root)
man = manifest(desc, leaves)
last = count - 1

chunking = []
for size, note in [(0, "empty content is not rich content"), (1, "1 byte"), (2049, "2 KB + 1"),
                   (1 << 18, "256 KiB: 16 chunks of 16 KiB"), ((1 << 18) + 1, "256 KiB + 1: 2^15"),
                   (SIZE, "the content below"), (1 << 21, "2 MiB: 16 chunks of 128 KiB"),
                   ((1 << 21) + 1, "2 MiB + 1: 256 KiB chunks"), (1 << 22, "4 MiB: 16 chunks of 256 KiB"),
                   ((1 << 22) + 1, "4 MiB + 1: 512 KiB chunks"), (10**9, "1 GB"),
                   (1 << 32, "4 GiB: 8,192 chunks of 512 KiB"), ((1 << 32) + 1, "4 GiB + 1"),
                   (MAX_BYTES, "8 GiB, the largest"), (MAX_BYTES + 1, "8 GiB + 1: too large")]:
    log_ = chunk_log(size)
    chunking.append({"description": note, "byteCount": str(size), "chunkLog": log_,
                     "chunkCount": None if log_ is None else chunk_count(size, log_),
                     "error": "unsupportedSize" if log_ is None else None})

chunk_entries = []
for i, c in enumerate(chunks):
    chunk_entries.append({"index": i, "byteCount": len(c), "leafHash": leaves[i].hex(),
                          "rawFrameHex": (u8(0) + c).hex()})

compressed = [
    {"description": "chunk 0 as one zstd frame at level 1, its content size in the header",
     "index": 0, "frameHex": (u8(1) + zstd(chunks[0], "-1")).hex()},
    {"description": "the last chunk as a zstd frame without a content size (window descriptor instead)",
     "index": last, "frameHex": (u8(1) + zstd(chunks[last], "-1", "--no-content-size")).hex()},
    {"description": "chunk 2 as two zstd frames, its first 1,000 bytes and the rest (a sender writes one; a receiver takes both)",
     "index": 2, "frameHex": (u8(1) + zstd(chunks[2][:1000], "-1") + zstd(chunks[2][1000:], "-1")).hex()},
]

valid_descriptors = [
    {"description": "the content's descriptor", "hex": desc.hex(), "byteCount": str(SIZE), "chunkLog": log,
     "root": root.hex()},
    {"description": "a chunkLog other than the chunking rule's is valid (a reader does not apply §17.2)",
     "hex": descriptor(SIZE, 16, root).hex(), "byteCount": str(SIZE), "chunkLog": 16, "root": root.hex()},
    {"description": "the largest content: 2^33 bytes in 16,384 chunks of 2^19",
     "hex": descriptor(MAX_BYTES, 19, b"\xaa" * 32).hex(), "byteCount": str(MAX_BYTES), "chunkLog": 19,
     "root": "aa" * 32},
    {"description": "1 byte in a chunk of 2^19", "hex": descriptor(1, 19, b"\x55" * 32).hex(), "byteCount": "1",
     "chunkLog": 19, "root": "55" * 32},
]

invalid_descriptors = [
    ("40 bytes: the root is cut short", desc[:-1]),
    ("42 bytes: a byte after the root", desc + b"\x00"),
    ("size 0", descriptor(0, 14, root)),
    ("chunkLog 13, below the range", descriptor(SIZE, 13, root)),
    ("chunkLog 20, above the range", descriptor(SIZE, 20, root)),
    ("chunkLog 255", descriptor(SIZE, 255, root)),
    ("2^32 + 1 bytes in chunks of 2^18: 16,385 chunks", descriptor((1 << 32) + 1, 18, root)),
    ("2^33 + 1 bytes in chunks of 2^19: 16,385 chunks", descriptor(MAX_BYTES + 1, 19, root)),
    ("size 2^64 - 1", descriptor((1 << 64) - 1, 19, root)),
]

swapped = [leaves[1], leaves[0]] + leaves[2:]
altered = list(leaves)
altered[2] = bytes([altered[2][0] ^ 1]) + altered[2][1:]
invalid_manifests = [
    ("the descriptor only, no count", desc, "malformedManifest"),
    ("the descriptor cut short", desc[:20], "malformedDescriptor"),
    ("a descriptor with chunkLog 20", descriptor(SIZE, 20, root) + u32(5) + b"".join(leaves), "malformedDescriptor"),
    ("count 4 and four hashes for content of five chunks", desc + u32(4) + b"".join(leaves[:4]), "chunkCountMismatch"),
    ("count 6 and six hashes for content of five chunks", desc + u32(6) + b"".join(leaves + leaves[:1]), "chunkCountMismatch"),
    ("count 2^32 - 1 and nothing after it: refused before the bytes are counted", desc + u32(0xffffffff), "chunkCountMismatch"),
    ("count 5 and four hashes", desc + u32(5) + b"".join(leaves[:4]), "malformedManifest"),
    ("count 5 and the last hash cut short", man[:-1], "malformedManifest"),
    ("a byte after the hashes", man + b"\x00", "malformedManifest"),
    ("the first two hashes swapped", manifest(desc, swapped), "rootMismatch"),
    ("hash 2 with its first bit flipped", manifest(desc, altered), "rootMismatch"),
    ("the right hashes under another root", manifest(descriptor(SIZE, log, b"\x00" * 32), leaves), "rootMismatch"),
]

bad_last = bytearray(chunks[last]); bad_last[100] ^= 0x20
stdin_window = zstd_stdin(chunks[0], "-1")
# Checks come in order, so a frame refused early needs no real chunk after it; raw frames of
# wrong size use the short last chunk, to keep this file small.
invalid_chunks = [
    ("index 5 of five chunks", 5, u8(0) + b"x", "indexOutOfRange"),
    ("index 5 with bad flags: the index is checked first", 5, u8(2) + b"x", "indexOutOfRange"),
    ("an empty frame: no flags byte", 0, b"", "badFlags"),
    ("flags 0x02", 0, u8(2) + b"x", "badFlags"),
    ("flags 0x80 on the last chunk", last, u8(0x80) + chunks[last][:16], "badFlags"),
    ("flags 0x03 before a valid zstd frame", 0, u8(3) + zstd(chunks[0], "-1"), "badFlags"),
    ("raw, one byte short", last, u8(0) + chunks[last][:-1], "wrongSize"),
    ("raw, one byte too many", last, u8(0) + chunks[last] + b"\x0a", "wrongSize"),
    ("raw, the flags byte only", 0, u8(0), "wrongSize"),
    ("a zstd frame declaring 16,385 bytes for a 16,384-byte chunk", 0, u8(1) + zstd(chunks[0] + b"x", "-1"), "wrongSize"),
    ("a zstd frame of 16 MiB of zeros (declared), refused before decoding", 0,
     u8(1) + zstd(bytes(16 << 20), "-1"), "wrongSize"),
    ("a zstd frame declaring 4,463 bytes for the 4,464-byte last chunk, refused once decoded", last, u8(1) + zstd(chunks[last][:-1], "-1"), "wrongSize"),
    ("the last chunk's zstd frame (4,464 bytes declared) at index 3, whose chunk is 16,384 bytes", 3,
     u8(1) + zstd(chunks[last], "-1"), "wrongSize"),
    ("a zstd frame without a content size that decompresses to 4,465 bytes for the 4,464-byte last chunk", last,
     u8(1) + zstd(chunks[last] + b"x", "-1", "--no-content-size"), "wrongSize"),
    ("a zstd frame without a content size that decompresses to 4,463 bytes for the 4,464-byte last chunk", last,
     u8(1) + zstd(chunks[last][:-1], "-1", "--no-content-size"), "wrongSize"),
    ("the chunk's zstd frame followed by a second frame of one byte", last,
     u8(1) + zstd(chunks[last], "-1") + zstd(b"x", "-1"), "wrongSize"),
    ("compressed, an empty payload", 0, u8(1), "corruptCompression"),
    ("compressed, text that is no zstd frame", 0, u8(1) + chunks[0][:64], "corruptCompression"),
    ("compressed, the zstd frame cut short by 4 bytes", 0, u8(1) + zstd(chunks[0], "-1")[:-4], "corruptCompression"),
    ("compressed, a zstd frame asking for a 2^19-byte window for a 2^14-byte chunk", 0, u8(1) + stdin_window,
     "corruptCompression"),
    ("raw, one bit flipped", last, u8(0) + bytes(bad_last), "badHash"),
    ("compressed, the last chunk with one bit flipped", last, u8(1) + zstd(bytes(bad_last), "-1"), "badHash"),
    ("compressed, chunk 1's bytes at index 0", 0, u8(1) + zstd(chunks[1], "-1"), "badHash"),
]
assert stdin_window[4] & 0x20 == 0 and stdin_window[5] >> 3 == 9  # no single segment; window 2^(10+9)

other_root = blake2b256(b"another content")
invalid_messages = [
    ("36 bytes: root and index without a frame", root + u32(0), "malformedChunkMessage"),
    ("a chunk of another content", other_root + u32(0) + u8(1) + zstd(chunks[0], "-1"), "unexpectedContent"),
    ("index 5 of five chunks", root + u32(5) + u8(1) + zstd(chunks[0], "-1"), "indexOutOfRange"),
    ("index 2^32 - 1", root + u32(0xffffffff) + u8(1) + zstd(chunks[0], "-1"), "indexOutOfRange"),
    ("bad flags", root + u32(0) + u8(0x41) + zstd(chunks[0], "-1"), "badFlags"),
    ("the last chunk at index 3", root + u32(3) + u8(1) + zstd(chunks[last], "-1"), "wrongSize"),
    ("chunk 0 at index 1", root + u32(1) + u8(1) + zstd(chunks[0], "-1"), "badHash"),
]

vectors = {
    "description": "Rich content (SPEC.md §17): chunking rule, hash tree, descriptor, manifest, chunk frames and messages",
    "limits": {"chunkLogMin": CHUNK_LOG_MIN, "chunkLogMax": CHUNK_LOG_MAX, "maxChunkCount": MAX_CHUNKS,
               "maxByteCount": str(MAX_BYTES), "descriptorByteCount": 41, "minimumSavingPercent": 3},
    "chunking": chunking,
    "content": {
        "description": "70,000 bytes of ASCII text (numbered lines) in five chunks of 2^14 bytes, the last 4,464; the content is its chunks' rawFrameHex without their first byte, in order",
        "byteCount": str(SIZE),
        "chunkLog": log,
        "chunkCount": count,
        "chunks": chunk_entries,
        "treeLevels": [[h.hex() for h in level] for level in levels],
        "root": root.hex(),
        "descriptorHex": desc.hex(),
        "manifestHex": man.hex(),
        "lastChunkMessageHex": (root + u32(last) + u8(0) + chunks[last]).hex(),
        "compressedFrames": compressed,
        "encoding": [
            {"description": "text compresses: Weft sends each chunk compressed", "mimeType": "text/plain; charset=utf-8",
             "compressed": True},
            {"description": "an image type is compressed already: Weft sends each chunk raw, exactly rawFrameHex",
             "mimeType": "image/png", "compressed": False},
            {"description": "the type is compared in lowercase", "mimeType": "Application/ZIP", "compressed": False},
            {"description": "SVG is text, an exception among image types", "mimeType": "image/svg+xml",
             "compressed": True},
        ],
    },
    "validDescriptors": valid_descriptors,
    "invalid": {
        "descriptors": [{"description": d, "hex": h.hex(), "error": "malformedDescriptor"} for d, h in invalid_descriptors],
        "manifests": [{"description": d, "hex": h.hex(), "error": e} for d, h, e in invalid_manifests],
        "chunkFrames": [{"description": d, "index": i, "frameHex": h.hex(), "error": e} for d, i, h, e in invalid_chunks],
        "chunkMessages": [{"description": d, "hex": h.hex(), "error": e} for d, h, e in invalid_messages],
    },
}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Protocol", "vectors", "content.json")
with open(path, "w") as f:
    json.dump(vectors, f, indent=1)
    f.write("\n")
