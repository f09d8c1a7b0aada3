#!/usr/bin/env python3
"""Writes Protocol/vectors/reconciliation.json from SPEC.md §14.3 alone (hashlib's BLAKE2b and a
reconciler written from the rules of that section, not from the Swift code).

The exchange is small enough that no answer reaches the limits, so the collapse is not
implemented here; the Swift tests check it on their own."""
import hashlib, json, os

MAX_RANGES = 4096
MAX_ENTRIES = 4096
ID_LIST_THRESHOLD = 4
SPLIT_COUNT = 4
FINGERPRINT_BYTES = 8
END = None  # the end bound
MODES = {"skip": 0, "fingerprint": 1, "idList": 2, "differing": 3}
END_LENGTH = 63


def blake2b(data, size):
    return hashlib.blake2b(data, digest_size=size).digest()


def item_hash(conversation, digest):
    return blake2b(conversation + digest, 32)


def fingerprint(hashes):
    total = sum(int.from_bytes(h, "little") for h in hashes) % (1 << 256)
    return blake2b(total.to_bytes(32, "little") + len(hashes).to_bytes(8, "big"), FINGERPRINT_BYTES)


def padded(bound):
    return bound + bytes(16 - len(bound))


# MARK: - Encoding (§14.3, Body)

def encode(ranges):
    out = bytearray(len(ranges).to_bytes(2, "big"))
    for bound, mode, payload in ranges:
        length = END_LENGTH if bound is END else len(bound)
        out.append(MODES[mode] << 6 | length)
        if bound is not END:
            out += bound
        if mode == "fingerprint":
            out += payload
        elif mode == "idList":
            out += len(payload).to_bytes(2, "big")
            for conversation, prefix in payload:
                out += conversation + prefix
        elif mode == "differing":
            out += len(payload).to_bytes(2, "big")
            for conversation in payload:
                out += conversation
    return bytes(out)


def describe(ranges):
    described = []
    for bound, mode, payload in ranges:
        entry = {"upperBound": "end" if bound is END else bound.hex(), "mode": mode}
        if mode == "fingerprint":
            entry["fingerprint"] = payload.hex()
        elif mode == "idList":
            entry["items"] = [{"conversation": c.hex(), "hashPrefix": p.hex()} for c, p in payload]
        elif mode == "differing":
            entry["conversations"] = [c.hex() for c in payload]
        described.append(entry)
    return described


def expects_reply(ranges):
    return any(mode in ("fingerprint", "idList") for _, mode, _ in ranges)


# MARK: - Rounds (§14.3, Rounds)

class Side:
    def __init__(self, items):
        # items: {conversation: digest}; ordered by conversation bytes
        self.keys = sorted(items)
        self.hashes = [item_hash(k, items[k]) for k in self.keys]

    def index(self, bound):
        if bound is END:
            return len(self.keys)
        return sum(1 for k in self.keys if k < padded(bound))

    def initiate(self):
        if not self.keys:
            return [(END, "idList", [])]
        return [(END, "fingerprint", fingerprint(self.hashes))]

    def respond(self, message):
        answer, learned, skip_to = [], [], None

        def add(rng):
            nonlocal skip_to
            if skip_to is not None:
                answer.append((skip_to, "skip", None))
            skip_to = None
            answer.append(rng)

        lower = 0
        for bound, mode, payload in message:
            upper = self.index(bound)
            if mode == "skip":
                skip_to = bound
            elif mode == "differing":
                learned += payload
                skip_to = bound
            elif mode == "fingerprint":
                if fingerprint(self.hashes[lower:upper]) == payload:
                    skip_to = bound
                elif upper - lower <= ID_LIST_THRESHOLD:
                    add((bound, "idList", [(self.keys[i], self.hashes[i][:8]) for i in range(lower, upper)]))
                else:
                    k = upper - lower
                    start = lower
                    for j in range(1, SPLIT_COUNT + 1):
                        end = lower + k * j // SPLIT_COUNT
                        if j == SPLIT_COUNT:
                            part_bound = bound
                        else:
                            last, first = self.keys[end - 1], self.keys[end]
                            n = next(i for i in range(16) if last[i] != first[i]) + 1
                            part_bound = first[:n]
                        add((part_bound, "fingerprint", fingerprint(self.hashes[start:end])))
                        start = end
            elif mode == "idList":
                theirs = dict(payload)
                ours = {self.keys[i]: self.hashes[i][:8] for i in range(lower, upper)}
                found = sorted(c for c in set(theirs) | set(ours) if theirs.get(c) != ours.get(c))
                if found:
                    add((bound, "differing", found))
                    learned += found
                else:
                    skip_to = bound
            lower = upper
        return (answer if expects_reply(message) else None), learned


# MARK: - The vector

def conversation(i):
    return blake2b(b"conversation %d" % i, 16)


def digest(i, version):
    return blake2b(b"digest %d %d" % (i, version), 32)


def entries(items):
    return [{"conversation": c.hex(), "digest": d.hex()} for c, d in items]


def main():
    item_set = [(conversation(i), digest(i, 0)) for i in range(3)]
    items = {
        "description": "item hash = BLAKE2b-256(conversation || digest); fingerprint = BLAKE2b-64(sum of item hashes "
        "mod 2^256, 32 bytes little-endian || count u64)",
        "entries": [dict(e, itemHash=item_hash(c, d).hex()) for e, (c, d) in zip(entries(item_set), item_set)],
        "fingerprint": fingerprint([item_hash(c, d) for c, d in item_set]).hex(),
        "emptyFingerprint": fingerprint([]).hex(),
    }

    def message(description, ranges):
        return {"description": description, "ranges": describe(ranges), "bodyHex": encode(ranges).hex(),
                "expectsReply": expects_reply(ranges)}

    c = lambda byte: bytes([byte]) * 16
    messages = [
        message("the first HAVE of a node holding the three items: one fingerprint to the end",
                Side(dict(item_set)).initiate()),
        message("the first HAVE of a node holding nothing: an empty id-list to the end", Side({}).initiate()),
        message("the answer that ends a reconciliation: no ranges", []),
        message("a skip, then an id-list of two items, a skip, and a differing list, ending below the end", [
            (bytes([0x40]), "skip", None),
            (bytes([0x80, 0x01]), "idList", [(bytes([0x40]) + bytes(15), bytes(range(8))), (c(0x7f), b"\xff" * 8)]),
            (bytes([0xc0]), "skip", None),
            (END, "differing", [bytes([0xc0]) + bytes(15), c(0xff)]),
        ]),
        message("a full 16-byte bound and a fingerprint", [
            (c(0x12), "fingerprint", bytes(range(8))),
            (END, "fingerprint", bytes(range(0x10, 0x18))),
        ]),
    ]

    initiator = {conversation(i): digest(i, 0) for i in list(range(40)) + [100]}
    responder = {conversation(i): digest(i, 1 if i in (5, 30) else 0) for i in list(range(40)) + [200]}
    sides = [Side(initiator), Side(responder)]
    steps, learned = [], [set(), set()]
    sent, sender = sides[0].initiate(), 0
    while sent is not None:
        reply, found = sides[1 - sender].respond(sent)
        steps.append({"from": ["initiator", "responder"][sender], "ranges": describe(sent), "bodyHex": encode(sent).hex(),
                      "receiverLearns": [f.hex() for f in found]})
        learned[1 - sender] |= set(found)
        sent, sender = reply, 1 - sender
    expected = sorted(k for k in set(initiator) | set(responder) if initiator.get(k) != responder.get(k))
    assert learned == [set(expected), set(expected)]
    exchange = {
        "description": "the initiator holds conversations 0-39 and 100, the responder 0-39 (5 and 30 with other digests) "
        "and 200; conversation i is BLAKE2b-128(\"conversation i\"), digest BLAKE2b-256(\"digest i v\")",
        "initiator": entries(sorted(initiator.items())),
        "responder": entries(sorted(responder.items())),
        "steps": steps,
        "differing": [k.hex() for k in expected],
    }

    def invalid(description, body, error):
        return {"description": description, "bodyHex": body.hex(), "error": error}

    def differing_range(bound_head, conversations):
        return bound_head + len(conversations).to_bytes(2, "big") + b"".join(conversations)

    invalids = [
        invalid("empty body: no range count", b"", "truncated"),
        invalid("one byte of the range count", b"\x00", "truncated"),
        invalid("a range count with no range", b"\x00\x01", "truncated"),
        invalid("a fingerprint cut short", b"\x00\x01\x7f" + bytes(7), "truncated"),
        invalid("an id-list whose count promises more items than follow", b"\x00\x01\xbf\x00\x02" + b"\x11" * 24, "truncated"),
        invalid("a prefix cut short", b"\x00\x01\x02\x80", "truncated"),
        invalid("a byte after the last range", b"\x00\x01\x3f\x00", "trailingBytes"),
        invalid("4097 ranges, over the limit", b"\x10\x01", "invalidBody"),
        invalid("a bound of 17 bytes", b"\x00\x01\x11" + bytes(17), "invalidBody"),
        invalid("bound length 62, neither a prefix length nor the end", b"\x00\x01\x3e", "invalidBody"),
        invalid("a fingerprint range with bound length 17", b"\x00\x01\x51" + bytes(17) + bytes(8), "invalidBody"),
        invalid("an empty bound: not above the start", b"\x00\x01\x00", "invalidBody"),
        invalid("bounds not ascending", b"\x00\x02\x01\x80\x01\x40", "invalidBody"),
        invalid("two ranges with the same bound", b"\x00\x02\x01\x80\x01\x80", "invalidBody"),
        invalid("the same bound written longer (80 and 80 00 are one bound)", b"\x00\x02\x01\x80\x02\x80\x00", "invalidBody"),
        invalid("a range after the end", b"\x00\x02\x3f\x3f", "invalidBody"),
        invalid("an empty differing list", b"\x00\x01\xff\x00\x00", "invalidBody"),
        invalid("a differing list out of order", b"\x00\x01" + differing_range(b"\xff", [c(0x22), c(0x11)]), "invalidBody"),
        invalid("a differing list with one conversation twice", b"\x00\x01" + differing_range(b"\xff", [c(0x22), c(0x22)]), "invalidBody"),
        invalid("an id-list item above its range's bound", b"\x00\x01\x81\x80\x00\x01" + c(0x90) + bytes(8), "invalidBody"),
        invalid("a differing item below its range's lower bound",
                b"\x00\x02\x01\x40" + differing_range(b"\xc1\x80", [c(0x30)]), "invalidBody"),
        invalid("an id-list of 4097 items (over the entry limit): refused by its count, before the items",
                b"\x00\x01\xbf\x10\x01", "invalidBody"),
        invalid("differing lists of 4097 conversations in all: refused by the second count",
                b"\x00\x02" + differing_range(b"\xc1\x80", [bytes([0, i >> 8 & 0xff, i & 0xff]) + bytes(13) for i in range(1, 2049)])
                + b"\xff\x08\x01", "invalidBody"),
    ]

    out = {
        "description": "HAVE bodies (SPEC.md \u00a714.3): range-based set reconciliation. \"items\": conversations with their "
        "log digests, item hashes and the fingerprint of all of them. \"messages\" encode to \"bodyHex\" and decode to "
        "their \"ranges\". \"exchange\": a whole reconciliation between two sets, each message as the sender writes it "
        "and what its receiver learns. \"invalid\": bodies refused with \"error\" (truncated, trailingBytes, "
        "invalidBody), answered with ERROR 6.",
        "limits": {"maxRangeCount": MAX_RANGES, "maxEntryCount": MAX_ENTRIES, "idListThreshold": ID_LIST_THRESHOLD,
                   "splitCount": SPLIT_COUNT},
        "items": items,
        "messages": messages,
        "exchange": exchange,
        "invalid": invalids,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Protocol", "vectors", "reconciliation.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
