-- Weft protocol dissector for Wireshark and tshark (SPEC.md §2–§4).
--
-- Shows, on the TCP port it is told, each side's preamble, the three Noise handshake messages,
-- and every transport record with its length. A record's frame type and payload are encrypted
-- (§4 seals the frame header too); `weft dump --keylog FILE` decrypts them.
--
--   tshark -X lua_script:Protocol/weft.lua -o weft.port:7000 -r capture.pcap
--   wireshark -X lua_script:Protocol/weft.lua     (then Preferences > Protocols > Weft > port)
--
-- The side that sends to the port is the initiator: after its preamble it sends handshake
-- messages 1 and 3, the other side message 2; then each side sends transport records.

local weft = Proto("weft", "Weft")

local f_magic = ProtoField.string("weft.magic", "Magic")
local f_version = ProtoField.uint16("weft.version", "Protocol version")
local f_reserved = ProtoField.uint16("weft.reserved", "Reserved", base.HEX)
local f_handshake = ProtoField.uint8("weft.handshake.message", "Handshake message")
local f_handshake_length = ProtoField.uint16("weft.handshake.length", "Noise message length")
local f_ephemeral = ProtoField.bytes("weft.handshake.ephemeral", "Ephemeral public key")
local f_sealed = ProtoField.bytes("weft.sealed", "Sealed bytes")
local f_record_length = ProtoField.uint32("weft.record.length", "Record length")
weft.fields = { f_magic, f_version, f_reserved, f_handshake, f_handshake_length, f_ephemeral, f_sealed, f_record_length }

weft.prefs.port = Pref.uint("TCP port", 0, "The port Weft nodes listen on in this capture")

-- Each direction's place in its stream: "preamble", "handshake" (with the messages left) or
-- "transport". Kept per direction as frames are dissected in order; each frame remembers the
-- state it started from, so dissecting it again (Wireshark's second pass, a click) repeats it.
local directions = {}
local frame_states = {}

local function direction_key(pinfo)
    return tostring(pinfo.src) .. ":" .. pinfo.src_port .. ">" .. tostring(pinfo.dst) .. ":" .. pinfo.dst_port
end

local function copy_state(state)
    return { phase = state.phase, left = state.left, handshake = state.handshake }
end

-- Dissects one item at `offset`; returns the bytes it took, or a negative count of bytes
-- missing, or 0 if nothing is left to read.
local function dissect_item(tvb, pinfo, tree, offset, state, initiator)
    local available = tvb:len() - offset
    if available <= 0 then return 0 end
    if state.phase == "preamble" then
        if available < 8 then return -(8 - available) end
        local item = tree:add(weft, tvb(offset, 8), "Preamble")
        item:add(f_magic, tvb(offset, 4))
        item:add(f_version, tvb(offset + 4, 2))
        item:add(f_reserved, tvb(offset + 6, 2))
        state.phase = "handshake"
        state.left = initiator and 2 or 1
        state.handshake = initiator and 1 or 2
        return 8, "Preamble v" .. tvb(offset + 4, 2):uint()
    elseif state.phase == "handshake" then
        if available < 2 then return -(2 - available) end
        local length = tvb(offset, 2):uint()
        if available < 2 + length then return -(2 + length - available) end
        local number = state.handshake
        local item = tree:add(weft, tvb(offset, 2 + length), "Handshake message " .. number .. " (" .. length .. " bytes)")
        item:add(f_handshake, number):set_generated()
        item:add(f_handshake_length, tvb(offset, 2))
        local sealed_start = offset + 2
        if number ~= 3 and length >= 32 then
            item:add(f_ephemeral, tvb(offset + 2, 32))
            sealed_start = offset + 34
        end
        if offset + 2 + length > sealed_start then item:add(f_sealed, tvb(sealed_start, offset + 2 + length - sealed_start)) end
        state.left = state.left - 1
        state.handshake = 3
        if state.left == 0 then state.phase = "transport" end
        return 2 + length, "Handshake " .. number
    else
        if available < 4 then return -(4 - available) end
        local length = tvb(offset, 4):uint()
        if available < 4 + length then return -(4 + length - available) end
        local item = tree:add(weft, tvb(offset, 4 + length), "Transport record (" .. length .. " sealed bytes: frame type and payload encrypted)")
        item:add(f_record_length, tvb(offset, 4))
        item:add(f_sealed, tvb(offset + 4, length))
        return 4 + length, "Record " .. length
    end
end

function weft.dissector(tvb, pinfo, tree)
    local key = direction_key(pinfo)
    local initiator = pinfo.dst_port == weft.prefs.port
    local frame_key = pinfo.number .. "/" .. key
    local state
    if frame_states[frame_key] then
        state = copy_state(frame_states[frame_key])
    else
        directions[key] = directions[key] or { phase = "preamble", left = 0, handshake = 1 }
        frame_states[frame_key] = copy_state(directions[key])
        state = directions[key]
    end
    pinfo.cols.protocol = "WEFT"
    local offset = 0
    local infos = {}
    while true do
        local taken, info = dissect_item(tvb, pinfo, tree, offset, state, initiator)
        if taken == 0 then break end
        if taken < 0 then
            -- Ask TCP for the rest of this item; it comes back with this frame's bytes first.
            pinfo.desegment_offset = offset
            pinfo.desegment_len = -taken
            break
        end
        infos[#infos + 1] = info
        offset = offset + taken
    end
    if #infos > 0 then pinfo.cols.info = table.concat(infos, ", ") end
    return offset
end

local registered = 0
function weft.prefs_changed()
    local table = DissectorTable.get("tcp.port")
    if registered ~= 0 then table:remove(registered, weft) end
    registered = weft.prefs.port
    if registered ~= 0 then table:add(registered, weft) end
end

function weft.init()
    directions = {}
    frame_states = {}
end
