#!/usr/bin/env python3
"""Writes Protocol/vectors/discovery.json from SPEC.md §16 alone (hashlib, hmac)."""
import hashlib, hmac, json, os

key = bytes(range(32))
tag = hmac.new(key, b"weft mesh tag v1", hashlib.blake2b).digest()[:16]
user = "weft1aoqqpp7tzyil4hlq3umoos6atft6jvrqtosq2xy53sdgiesvgg4powvuke"  # a user identifier of key-text.json
out = {
    "description": "LAN discovery (SPEC.md §16.1). meshTag: the first 16 bytes of HMAC-BLAKE2b(meshKey, \"weft mesh tag v1\"). txt: a node's TXT strings for its user and mesh tag, in order.",
    "meshTag": [{"meshKeyHex": key.hex(), "tagHex": tag.hex()}],
    "txt": [{"user": user, "tagHex": tag.hex(), "strings": ["v=1", "user=" + user, "mesh=" + tag.hex()]}],
}
path = os.path.join(os.path.dirname(__file__), "..", "Protocol", "vectors", "discovery.json")
with open(path, "w") as f:
    json.dump(out, f, indent=2, ensure_ascii=False)
    f.write("\n")
