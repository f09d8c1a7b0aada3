#!/usr/bin/env python3
"""Writes Protocol/vectors/control.json from SPEC.md §15 alone (struct packing by hand)."""
import json, struct, os

ALICE = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
BOB = "29acbae141bccaf0b22e1a94d34d0bc7361e526d0bfe12c89794bc9322966dd7"
CAROL = "ff" * 32
CONV = "2a2c97dbe1f39dd1e1f9d72212852dae"
MERGED = "00112233445566778899aabbccddeeff"
MSG = "".join("%02x" % i for i in range(32, 64))
HLC = (1700000000000 << 16) | 3
HLC2 = (1700000005000 << 16)

def u8(v): return struct.pack(">B", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)
def u64(v): return struct.pack(">Q", v)
def text(s): b = s.encode(); return u16(len(b)) + b
def blob(b): return u32(len(b)) + b
def h(x): return bytes.fromhex(x)
def lst(items): return u16(len(items)) + b"".join(items)
def page(items): return u32(len(items)) + b"".join(items)
def opt(v): return u8(0) if v is None else u8(1) + u64(v)
def frame(t, rid, body): return (u32(5 + len(body)) + u8(t) + u32(rid) + body).hex()

requests = []
def req(description, type_, rid, fields, body):
    requests.append({"description": description, "request": dict(type=type_, **fields), "requestID": rid,
                     "hex": frame(TYPES[type_], rid, body)})

TYPES = {"PING": 1, "STATUS": 2, "PEERS": 3, "USERS": 4, "CREATE CONVERSATION": 0x10, "ADD PARTICIPANTS": 0x11,
         "REMOVE PARTICIPANTS": 0x12, "LEAVE": 0x13, "CONVERSATIONS": 0x14, "CONVERSATION": 0x15, "SEND": 0x20,
         "MESSAGES": 0x21, "MARK READ": 0x22, "MARK ALL READ": 0x23, "SEND BATCH": 0x24, "WAIT": 0x30, "WATCH": 0x31,
         "STATISTICS": 0x05, "CONNECT": 0x40, "CUT": 0x41, "HEAL": 0x42, "STATISTICS RESULT": 0x85,
         "DONE": 0x80, "PONG": 0x81, "STATUS RESULT": 0x82, "PEERS RESULT": 0x83, "USERS RESULT": 0x84,
         "CONVERSATION RESULT": 0x90, "CONVERSATIONS RESULT": 0x91, "SENT": 0x92, "MESSAGES RESULT": 0x93,
         "FOUND": 0x94, "SENT BATCH": 0x95, "WATCHING": 0xa0, "EVENT": 0xa1, "ERROR": 0xff}

req("PING with value 7 (the example of §15.2)", "PING", 1, {"value": "7"}, u64(7))
req("STATUS", "STATUS", 2, {}, b"")
req("PEERS", "PEERS", 3, {}, b"")
req("USERS", "USERS", 4, {}, b"")
req("a distinct conversation with bob, titled", "CREATE CONVERSATION", 5,
    {"distinct": True, "announce": False, "participants": [BOB], "metadata": {"title": "Lunch"}},
    u8(1) + lst([h(BOB)]) + lst([text("title") + text("Lunch")]))
req("an announced non-distinct conversation with bob and carol, no metadata", "CREATE CONVERSATION", 6,
    {"distinct": False, "announce": True, "participants": [BOB, CAROL], "metadata": {}},
    u8(2) + lst([h(BOB), h(CAROL)]) + lst([]))
req("add carol", "ADD PARTICIPANTS", 7, {"conversation": CONV, "participants": [CAROL]}, h(CONV) + lst([h(CAROL)]))
req("remove carol", "REMOVE PARTICIPANTS", 8, {"conversation": CONV, "participants": [CAROL]}, h(CONV) + lst([h(CAROL)]))
req("leave", "LEAVE", 9, {"conversation": CONV}, h(CONV))
req("the first page of conversations", "CONVERSATIONS", 10, {"offset": 0}, u32(0))
req("one conversation", "CONVERSATION", 11, {"conversation": CONV}, h(CONV))
req("a text part and a 4-byte PNG part", "SEND", 12,
    {"conversation": CONV, "parts": [{"mimeType": "text/plain", "dataHex": "6869"}, {"mimeType": "image/png", "dataHex": "89504e47"}]},
    h(CONV) + lst([text("text/plain") + blob(b"hi"), text("image/png") + blob(h("89504e47"))]))
req("messages from position 2", "MESSAGES", 13, {"conversation": CONV, "offset": 2}, h(CONV) + u32(2))
req("mark one message read", "MARK READ", 14, {"message": MSG}, h(MSG))
req("mark all read", "MARK ALL READ", 15, {"conversation": CONV}, h(CONV))
req("wait 1.5 s for a message", "WAIT", 16, {"object": {"message": MSG}, "timeoutMilliseconds": 1500}, u8(2) + h(MSG) + u32(1500))
req("wait 0 s for a conversation", "WAIT", 17, {"object": {"conversation": CONV}, "timeoutMilliseconds": 0}, u8(1) + h(CONV) + u32(0))
req("watch", "WATCH", 18, {}, b"")
req("statistics", "STATISTICS", 19, {}, b"")
req("dial 127.0.0.1:7400 and keep dialing it", "CONNECT", 20, {"address": "127.0.0.1:7400"}, text("127.0.0.1:7400"))
req("cut the link to bob", "CUT", 21, {"peer": BOB}, h(BOB))
req("heal the link to bob", "HEAL", 22, {"peer": BOB}, h(BOB))
req("two text messages, the second to another conversation", "SEND BATCH", 23,
    {"messages": [{"conversation": CONV, "parts": [{"mimeType": "text/plain", "dataHex": "6869"}]},
                  {"conversation": MERGED, "parts": [{"mimeType": "text/plain", "dataHex": "796f"}]}]},
    lst([h(CONV) + lst([text("text/plain") + blob(b"hi")]), h(MERGED) + lst([text("text/plain") + blob(b"yo")])]))

conversation_fields = {"conversation": CONV, "creator": ALICE, "createdAt": str(HLC), "distinct": True,
    "participants": [ALICE, BOB], "merged": [MERGED], "metadata": {"title": "Lunch"}, "messageCount": 1,
    "unreadCount": 0, "lastMessageAt": str(HLC2), "unsyncedOperations": "0"}
conversation_bytes = (h(CONV) + h(ALICE) + u64(HLC) + u8(1) + lst([h(ALICE), h(BOB)]) + lst([h(MERGED)])
    + lst([text("title") + text("Lunch")]) + u32(1) + u32(0) + u64(HLC2) + opt(0))
message_fields = {"message": MSG, "conversation": CONV, "sender": ALICE, "sentAt": str(HLC2), "position": 2,
    "isSent": True, "isUnread": False,
    "parts": [{"mimeType": "text/plain", "size": 2, "inlineHex": "6869"}, {"mimeType": "image/png", "size": 4096, "inlineHex": ""}],
    "recipients": [{"user": BOB, "status": "delivered", "reason": ""}]}
message_bytes = (h(MSG) + h(CONV) + h(ALICE) + u64(HLC2) + u32(2) + u8(1)
    + lst([text("text/plain") + u32(2) + blob(b"hi"), text("image/png") + u32(4096) + blob(b"")])
    + lst([h(BOB) + u8(3) + text("")]))

responses = []
def resp(description, type_, rid, fields, body):
    responses.append({"description": description, "response": dict(type=type_, **fields), "requestID": rid,
                      "hex": frame(TYPES[type_], rid, body)})

resp("DONE", "DONE", 7, {}, b"")
resp("PONG 7", "PONG", 1, {"value": "7"}, u64(7))
resp("a node that does not replicate yet: held and unsynced unknown", "STATUS RESULT", 2,
    {"user": ALICE, "displayName": "alice", "listenAddress": "127.0.0.1:4000", "startedAt": "1700000000000",
     "connectedPeers": 1, "conversations": 2, "unsentMessages": 0, "timeToLiveSeconds": 43200, "retentionDays": 30,
     "replicating": False, "heldOperations": None, "unsyncedOperations": None, "discovery": False,
     "discoveryInterfaces": []},
    h(ALICE) + text("alice") + text("127.0.0.1:4000") + u64(1700000000000) + u32(1) + u32(2) + u32(0) + u32(43200)
    + u32(30) + u8(0) + opt(None) + opt(None) + u8(0) + lst([]))
resp("a replicating node on a LAN: discovery on two interfaces", "STATUS RESULT", 2,
    {"user": ALICE, "displayName": "alice", "listenAddress": "0.0.0.0:7400", "startedAt": "1700000000000",
     "connectedPeers": 3, "conversations": 2, "unsentMessages": 1, "timeToLiveSeconds": 43200, "retentionDays": 30,
     "replicating": True, "heldOperations": "120", "unsyncedOperations": "0", "discovery": True,
     "discoveryInterfaces": ["eth0", "wlan0"]},
    h(ALICE) + text("alice") + text("0.0.0.0:7400") + u64(1700000000000) + u32(3) + u32(2) + u32(1) + u32(43200)
    + u32(30) + u8(1) + opt(120) + opt(0) + u8(1) + lst([text("eth0"), text("wlan0")]))
resp("bob, inbound, holding 3 conversations and 120 operations", "PEERS RESULT", 3,
    {"peers": [{"user": BOB, "displayName": "bob", "address": "127.0.0.1:50000", "origin": "inbound",
                "connectedAt": "1700000000500", "holdings": {"conversations": 3, "operations": "120"}}]},
    page([h(BOB) + text("bob") + text("127.0.0.1:50000") + u8(2) + u64(1700000000500) + u8(1) + u32(3) + u64(120)]))
resp("carol, found on the LAN and dialed, holdings not known yet", "PEERS RESULT", 3,
    {"peers": [{"user": CAROL, "displayName": "carol", "address": "10.0.0.3:7400", "origin": "discovered",
                "connectedAt": "1700000000900", "holdings": None}]},
    page([h(CAROL) + text("carol") + text("10.0.0.3:7400") + u8(4) + u64(1700000000900) + u8(0)]))
resp("bob, connected", "USERS RESULT", 4, {"users": [{"user": BOB, "displayName": "bob", "isConnected": True}]},
    page([h(BOB) + text("bob") + u8(1)]))
resp("two replication counters", "STATISTICS RESULT", 19,
    {"counters": [{"name": "operationsReceived", "value": "120"}, {"name": "duplicatesReceived", "value": "3"}]},
    lst([text("operationsReceived") + u64(120), text("duplicatesReceived") + u64(3)]))
resp("a conversation with one merged into it", "CONVERSATION RESULT", 11, conversation_fields, conversation_bytes)
resp("a page holding the only conversation", "CONVERSATIONS RESULT", 10, {"total": 1, "conversations": [conversation_fields]},
    u32(1) + page([conversation_bytes]))
resp("the message stored", "SENT", 12, {"message": MSG}, h(MSG))
resp("a page from position 2 of 3: a text part inline, a 4096-byte part by size only", "MESSAGES RESULT", 13,
    {"total": 3, "messages": [message_fields]}, u32(3) + page([message_bytes]))
resp("the first message stored, the second refused", "SENT BATCH", 23,
    {"outcomes": [{"message": MSG}, {"code": 10, "text": "There is no conversation " + MERGED + "."}]},
    lst([u8(1) + h(MSG), u8(2) + u16(10) + text("There is no conversation " + MERGED + ".")]))
resp("the message exists", "FOUND", 16, {"object": {"message": MSG}}, u8(2) + h(MSG))
resp("the watch started", "WATCHING", 18, {}, b"")
resp("a conversation's participants changed", "EVENT", 18,
    {"event": {"kind": "conversation", "change": "update", "conversation": CONV, "property": "participants"}},
    u8(1) + u8(2) + h(CONV) + text("participants"))
resp("a message was created", "EVENT", 18,
    {"event": {"kind": "message", "change": "create", "message": MSG, "conversation": CONV, "property": ""}},
    u8(2) + u8(1) + h(MSG) + u8(1) + h(CONV) + text(""))
resp("a message was deleted", "EVENT", 18,
    {"event": {"kind": "message", "change": "delete", "message": MSG, "conversation": None, "property": ""}},
    u8(2) + u8(3) + h(MSG) + u8(0) + text(""))
resp("bob read the message", "EVENT", 18,
    {"event": {"kind": "delivery", "message": MSG, "recipient": BOB, "status": "read", "reason": ""}},
    u8(3) + h(MSG) + h(BOB) + u8(4) + text(""))
resp("the message failed for bob", "EVENT", 18,
    {"event": {"kind": "delivery", "message": MSG, "recipient": BOB, "status": "failed", "reason": "expired: not delivered within 12 h"}},
    u8(3) + h(MSG) + h(BOB) + u8(5) + text("expired: not delivered within 12 h"))
resp("the watcher missed 2 batches", "EVENT", 18, {"event": {"kind": "missed", "batches": 2}}, u8(4) + u32(2))
resp("an unknown conversation", "ERROR", 11, {"code": 10, "text": "There is no conversation " + CONV + " on this node."},
    u16(10) + text("There is no conversation " + CONV + " on this node."))

invalid = [
    {"description": "a length under 5", "hex": (u32(4) + u8(1) + b"\0\0\0").hex(), "errorCode": 1},
    {"description": "a length over 1 MiB, refused from the length field alone", "hex": u32(1048577).hex(), "errorCode": 2},
    {"description": "an unassigned request type", "hex": frame(0x7f, 9, b""), "errorCode": 3},
    {"description": "a response type sent as a request", "hex": frame(0x80, 9, b""), "errorCode": 3},
    {"description": "PING cut short", "hex": frame(1, 1, u64(7)[:7]), "errorCode": 1},
    {"description": "PING with a byte left over", "hex": frame(1, 1, u64(7) + b"\0"), "errorCode": 1},
    {"description": "STATUS with a body", "hex": frame(2, 2, b"\0"), "errorCode": 1},
    {"description": "CREATE CONVERSATION with an unassigned flag bit", "hex": frame(0x10, 5, u8(4) + lst([h(BOB)]) + lst([])), "errorCode": 1},
    {"description": "CREATE CONVERSATION announcing 2 participants, holding 1", "hex": frame(0x10, 5, u8(1) + u16(2) + h(BOB) + lst([])), "errorCode": 1},
    {"description": "CREATE CONVERSATION with a metadata key twice", "hex": frame(0x10, 5, u8(1) + lst([h(BOB)]) + lst([text("a") + text("1"), text("a") + text("2")])), "errorCode": 1},
    {"description": "ADD PARTICIPANTS with an empty list", "hex": frame(0x11, 7, h(CONV) + lst([])), "errorCode": 1},
    {"description": "SEND with a MIME type that is not UTF-8", "hex": frame(0x20, 12, h(CONV) + lst([u16(2) + b"\xc3\x28" + blob(b"x")])), "errorCode": 1},
    {"description": "SEND BATCH of no messages", "hex": frame(0x24, 23, lst([])), "errorCode": 1},
    {"description": "SEND BATCH of 257 messages", "hex": frame(0x24, 23, lst([h(CONV) + lst([text("text/plain") + blob(b"x")])] * 257)), "errorCode": 1},
    {"description": "CUT with a user cut short", "hex": frame(0x41, 21, h(BOB)[:31]), "errorCode": 1},
    {"description": "WAIT for an unassigned object kind", "hex": frame(0x30, 16, u8(3) + h(CONV) + u32(0)), "errorCode": 1},
]

out = {
    "description": "Control protocol frames (SPEC.md §15). \"requests\" and \"responses\" encode to \"hex\" (the whole frame, length included) with \"requestID\", and \"hex\" decodes to exactly their fields. Users, conversations and messages are hex; hlc and u64 values are decimal strings; null is an absent optional. \"invalid\" request frames are refused with ERROR \"errorCode\" and the connection closes.",
    "requests": requests, "responses": responses, "invalid": invalid,
}
path = os.path.join(os.path.dirname(__file__), "..", "Protocol", "vectors", "control.json")
with open(path, "w") as f:
    json.dump(out, f, indent=2, ensure_ascii=False)
    f.write("\n")
