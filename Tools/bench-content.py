#!/usr/bin/env python3
"""Content-transfer benchmark (issue 22, "Benchmarks"): run by ./Tools/bench-content, which
installs what this needs and builds weft first. See that script for how to run it.

Two processes of each tool on loopback move the same files in the same run:
  - Syncthing: two instances, send-only folder -> receive-only folder, compression off and "always"
  - rsync -z --compress-choice=zstd over ssh to localhost (an sshd of our own on a loopback port)
  - Weft: two `weft node`s, `weft send --file` on one, `weft download` on the other
and the machine's limits are measured first (zstd -1, BLAKE2b, ChaCha20-Poly1305, loopback TCP).

Bytes on the wire are counted by iptables on the loopback interface: a chain of our own, hooked
into OUTPUT for `-o lo`, with one counting rule per listening port and direction, each packet
counted by the first rule it matches. Every packet on lo passes OUTPUT exactly once, so the
counters are exact and include IP and TCP headers. The bytes one side sends are those from its
listening port (connections it accepted, or dialed from that port) plus those from elsewhere
to the other's listening port (connections it dialed), so it does not matter who dialed whom.
"""

import argparse
import ctypes
import ctypes.util
import getpass
import hashlib
import itertools
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import xml.etree.ElementTree as ET

MiB = 1 << 20
MB = 1e6  # figures are in MB/s of 10^6 bytes, as in the issue

# The issue's goals for Weft (shown beside Weft's rows).
GOAL_TEXT_MBS = 200
GOAL_TEXT_WIRE_RATIO = 0.35  # "about a third of the bytes"
GOAL_RANDOM_MBS = 350
GOAL_RESUME_RATIO = 1.02
GOAL_RESUME_SECONDS = 0.5
GOAL_RSS_MB = 48

# After a restart, data "flows again" once the sender has sent this much more to the receiver:
# well above a reconnection's handshake and index/manifest exchange, and a few chunks of data.
FLOW_BYTES = 1 * MiB

STOP = threading.Event()


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def now():
    return time.monotonic()


def wait_until(predicate, timeout, interval=0.01, what="condition"):
    """Polls predicate() until it returns something true; returns that. Raises on timeout."""
    deadline = now() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if now() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def free_port():
    """A free TCP port on 127.0.0.1 (closed again at once; nothing else here races for it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blake2b_file(path):
    h = hashlib.blake2b()
    with open(path, "rb") as f:
        while chunk := f.read(4 * MiB):
            h.update(chunk)
    return h.hexdigest()


def held_bytes(path):
    """Bytes a (sparse, pre-sized) partial file really holds: its allocated blocks."""
    try:
        return os.stat(path).st_blocks * 512
    except FileNotFoundError:
        return 0


def vm_hwm_mb(pid):
    """Peak resident memory (VmHWM) of a running process, in MB of 10^6 bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MB
    except FileNotFoundError:
        pass
    return None


def cpu_seconds(pid, system_only=False):
    """User + system CPU seconds a running process has used (all its threads), or only the
    system (kernel) seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[12]) if system_only else int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, IndexError, ValueError):
        return None


# MARK: - Processes


class Processes:
    """Every process the benchmark starts, each in a session of its own so that it and its
    children (sshd's per-connection processes) can be signalled as a group, by its id."""

    def __init__(self):
        self.running = []

    def start(self, argv, log_path, env=None, cwd=None):
        out = open(log_path, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             env=env, cwd=cwd, start_new_session=True)
        out.close()
        p.log_path = log_path
        self.running.append(p)
        return p

    def start_piped(self, argv, log_path, env=None):
        """Standard output to us, line by line (weft download --json); standard error to a log."""
        err = open(log_path, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                             env=env, text=True, start_new_session=True)
        err.close()
        p.log_path = log_path
        self.running.append(p)
        return p

    def kill9(self, p):
        """SIGKILL, as a crash would: no chance to flush anything."""
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        self.forget(p)

    def stop(self, p, grace=10):
        """SIGTERM, then SIGKILL if it has not exited after `grace` seconds."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"  pid {p.pid} did not stop in {grace} s; killing it")
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        # The group may still hold children after its leader exited (sshd sessions).
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.forget(p)

    def forget(self, p):
        if p in self.running:
            self.running.remove(p)

    def stop_all(self):
        for p in list(reversed(self.running)):
            self.stop(p, grace=3)


PROCS = Processes()


def run(argv, timeout=120, check=True, **kw):
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                          check=check, **kw)


# MARK: - Bytes on the wire


class Wire:
    """iptables byte counters on lo, per TCP port and direction (see the module's docstring)."""

    def __init__(self):
        self.chain = f"WEFTBENCH{os.getpid()}"
        self.ports = set()
        self.available = False
        self.why = ""
        if shutil.which("iptables") is None:
            self.why = "iptables not found"
            return
        try:
            run(["iptables", "-w", "-N", self.chain])
            run(["iptables", "-w", "-I", "OUTPUT", "1", "-o", "lo", "-j", self.chain])
            self.available = True
        except subprocess.CalledProcessError as e:
            self.why = f"iptables refused: {e.stderr.strip()}"
            self.remove()

    def watch(self, *ports):
        """Counts the TCP traffic from and to these ports. Each rule RETURNs, so a packet is
        counted once, by the first rule it matches; the source-port rules come first (inserted
        at the top, the destination-port rules appended). That matters: Syncthing dials from its
        own listening port (SO_REUSEPORT), so its packets match a source-port rule and a
        destination-port rule at once."""
        if not self.available:
            return
        for port in ports:
            if port in self.ports:
                continue
            run(["iptables", "-w", "-I", self.chain, "1", "-p", "tcp", "--sport", str(port), "-j", "RETURN"])
            run(["iptables", "-w", "-A", self.chain, "-p", "tcp", "--dport", str(port), "-j", "RETURN"])
            self.ports.add(port)

    def read(self):
        """{("spt"|"dpt", port): bytes} for every watched port."""
        if not self.available:
            return {}
        out = run(["iptables", "-w", "-L", self.chain, "-n", "-v", "-x"]).stdout
        counts = {}
        for line in out.splitlines():
            m = re.match(r"\s*\d+\s+(\d+)\s.*\b(spt|dpt):(\d+)", line)
            if m:
                counts[(m.group(2), int(m.group(3)))] = int(m.group(1))
        return counts

    def sent(self, sender_port, receiver_port, counts=None):
        """Bytes the process listening on sender_port sent to the one on receiver_port: from its
        port (connections it accepted, or dialed from that port) and, from any other port, to
        the receiver's (connections it dialed from an ephemeral port)."""
        if not self.available:
            return None
        c = self.read() if counts is None else counts
        return c.get(("spt", sender_port), 0) + c.get(("dpt", receiver_port), 0)

    def remove(self):
        subprocess.run(["iptables", "-w", "-D", "OUTPUT", "-o", "lo", "-j", self.chain], capture_output=True)
        subprocess.run(["iptables", "-w", "-F", self.chain], capture_output=True)
        subprocess.run(["iptables", "-w", "-X", self.chain], capture_output=True)
        self.available = False


def wait_for_flow(wire, sender_port, receiver_port, since, threshold, timeout, done=lambda: False):
    """Polls the wire every 20 ms (an iptables call costs about 4 ms) until the sender has sent
    `threshold` bytes more than `since`; returns that moment (monotonic), or None if done()
    became true first or the wire cannot be counted."""
    if not wire.available:
        return None
    deadline = now() + timeout
    while now() < deadline:
        if wire.sent(sender_port, receiver_port) - since >= threshold:
            return now()
        if done():
            return None
        time.sleep(0.02)
    return None


def loopback_only(pids):
    """Sockets of these processes that are not on loopback (listening on 0.0.0.0 included):
    a guard that the baselines' configuration keeps them off the network."""
    try:
        out = run(["ss", "-tunapH"], check=False).stdout
    except FileNotFoundError:
        return ["ss not found: not checked"]
    bad = []
    for line in out.splitlines():
        if not any(f"pid={pid}," in line for pid in pids):
            continue
        fields = line.split()
        local, peer = fields[4], fields[5]
        for address in (local, peer):
            host = address.rsplit(":", 1)[0].strip("[]")
            if host.startswith("::ffff:"):
                host = host[7:]
            if not (host.startswith("127.") or host in ("::1", "*") or (address is peer and host in ("0.0.0.0", "::"))):
                bad.append(line.strip())
                break
    return bad


# MARK: - Test files


def write_text_file(path, size, seed=22):
    """Deterministic log-like text: timestamps, levels, components, a trace id and one of
    32,768 message bodies per line. zstd -1 compresses it about 3.5x (the 120-bit trace ids keep it from
    compressing more); no two 128 KiB blocks are alike, so block-level deduplication (Syncthing's)
    finds nothing. About 1 s per 32 MiB."""
    rng = random.Random(seed)
    levels = ["INFO"] * 12 + ["DEBUG"] * 6 + ["WARN"] * 2 + ["ERROR"]
    components = ["replication", "transport", "store", "control", "discovery", "content", "scheduler",
                  "outbox", "handshake", "reconcile", "journal", "receipts"]
    users = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "niaj"]
    verbs = ["GET", "PUT", "POST", "DELETE", "SYNC", "PING"]
    paths = ["/conversations", "/messages", "/receipts", "/content", "/peers", "/status", "/chunks"]
    templates = [
        "{u} {v} {p} status={s} bytes={n} took={d}ms",
        "peer {ip}:{port} sent {n} bytes in {c} frames (window {w})",
        "applied {c} operations for {u} in {d}ms",
        "chunk {c} verified ({n} bytes, ratio {r})",
        "retrying {v} {p} for {u} after {d}ms: connection reset by peer",
        "checkpoint wal pages={c} duration={d}ms size={n}",
    ]
    heads = ["%-5s [%s]" % (level, component) for level in levels for component in components]
    bodies = [rng.choice(templates).format(
        u=rng.choice(users), v=rng.choice(verbs), p=rng.choice(paths),
        s=rng.choice((200, 200, 200, 204, 404, 500)), n=rng.randrange(64, 70000), d=rng.randrange(0, 900),
        ip="127.0.%d.%d" % (rng.randrange(4), rng.randrange(1, 255)), port=rng.randrange(7400, 7410),
        c=rng.randrange(1, 4000), w=rng.choice((16, 32, 64)), r="%.2f" % (rng.random() * 4))
        for _ in range(32768)]
    t = 1764000000000  # ms
    lines_per_batch, id_hex = 8192, 30
    made = 0
    with open(path, "wb") as f:
        while made < size:
            times = list(itertools.accumulate(rng.choices(range(40), k=lines_per_batch), initial=t))
            t = times[-1]
            ids = format(rng.getrandbits(4 * id_hex * lines_per_batch), "0%dx" % (id_hex * lines_per_batch))
            hs = rng.choices(heads, k=lines_per_batch)
            bs = rng.choices(bodies, k=lines_per_batch)
            batch = "".join("%d.%03d %s trace=%s %s\n" % (times[i] // 1000, times[i] % 1000, hs[i],
                                                          ids[i * id_hex:(i + 1) * id_hex], bs[i])
                            for i in range(lines_per_batch)).encode()
            batch = batch[:size - made]
            f.write(batch)
            made += len(batch)


def write_random_file(path, size, seed=23):
    """Deterministic incompressible bytes (Python's Mersenne Twister: no zstd gain at all)."""
    rng = random.Random(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 16 * MiB)
            f.write(rng.randbytes(n))
            left -= n


# MARK: - Machine limits


def measure_limits(text_file, work):
    limits = {}

    # zstd -1 in memory, on the text file: the sender's compression, one core and two threads.
    for threads in (1, 2):
        r = run(["zstd", "-b1", "-e1", "-i3", f"-T{threads}", text_file], check=False, timeout=300)
        found = re.findall(r"\(x?([\d.]+)\),\s*([\d.]+) MB/s", (r.stdout + r.stderr).replace("\r", "\n"))
        if found:
            ratio, speed = found[-1]
            limits[f"zstd1_T{threads}_MBps"] = float(speed)
            limits["zstd1_ratio"] = float(ratio)

    # libsodium, as Weft uses it: BLAKE2b (crypto_generichash_blake2b) and ChaCha20-Poly1305 IETF
    # on 256 KiB buffers (a chunk), one core. hashlib's BLAKE2b when libsodium cannot be loaded.
    buf_len = 256 * 1024
    buf = ctypes.create_string_buffer(os.urandom(buf_len), buf_len)
    name = ctypes.util.find_library("sodium")
    sodium = None
    if name:
        try:
            sodium = ctypes.CDLL(name)
            if sodium.sodium_init() < 0:
                sodium = None
        except OSError:
            sodium = None

    def rate(step, seconds=1.5):
        step()  # warm up
        n, t0 = 0, now()
        while now() - t0 < seconds:
            step()
            n += 1
        return n * buf_len / (now() - t0) / MB

    if sodium:
        out = ctypes.create_string_buffer(64)
        limits["blake2b_MBps"] = rate(lambda: sodium.crypto_generichash_blake2b(
            out, ctypes.c_size_t(64), buf, ctypes.c_ulonglong(buf_len), None, ctypes.c_size_t(0)))
        limits["blake2b_impl"] = "libsodium crypto_generichash_blake2b"
        cipher = ctypes.create_string_buffer(buf_len + 16)
        clen = ctypes.c_ulonglong(0)
        key, nonce = ctypes.create_string_buffer(32), ctypes.create_string_buffer(12)
        limits["chacha20poly1305_MBps"] = rate(lambda: sodium.crypto_aead_chacha20poly1305_ietf_encrypt(
            cipher, ctypes.byref(clen), buf, ctypes.c_ulonglong(buf_len), None, ctypes.c_ulonglong(0), None, nonce, key))
        limits["chacha20poly1305_impl"] = "libsodium crypto_aead_chacha20poly1305_ietf_encrypt"
    else:
        data = bytes(buf)
        limits["blake2b_MBps"] = rate(lambda: hashlib.blake2b(data).digest())
        limits["blake2b_impl"] = "Python hashlib.blake2b (libsodium not found)"

    # OpenSSL's ChaCha20-Poly1305 for reference (often faster than libsodium's: AVX-512).
    if shutil.which("openssl"):
        r = run(["openssl", "speed", "-mr", "-seconds", "2", "-bytes", str(buf_len), "-evp", "chacha20-poly1305"],
                check=False, timeout=60)
        m = re.search(r"^\+F:\d+:[^:]+:([\d.]+)", r.stdout + r.stderr, re.M)
        if m:
            limits["openssl_chacha20poly1305_MBps"] = float(m.group(1)) / MB

    # Random data on two cores: each byte is hashed and encrypted by the sender and decrypted and
    # hashed by the receiver, so 2 cores give 1 / (1/encryption + 1/hashing).
    if "chacha20poly1305_MBps" in limits:
        limits["random_two_core_MBps"] = 1 / (1 / limits["chacha20poly1305_MBps"] + 1 / limits["blake2b_MBps"])

    # Loopback TCP, one stream, 3 s: iperf3 if there, else a Python socket pair.
    limits["loopback_tcp_MBps"], limits["loopback_tcp_how"] = loopback_tcp(work)
    return limits


def loopback_tcp(work):
    port = free_port()
    if shutil.which("iperf3"):
        server = PROCS.start(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)], os.path.join(work, "iperf3.log"))
        try:
            for _ in range(50):
                r = run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "3", "-J"], check=False, timeout=30)
                try:
                    received = json.loads(r.stdout)["end"]["sum_received"]
                    return received["bits_per_second"] / 8 / MB, "iperf3, one stream, 3 s"
                except (ValueError, KeyError):
                    time.sleep(0.1)  # the server is not listening yet (iperf3 may still exit 0)
        finally:
            PROCS.stop(server)
    # Python: one thread sends 256 KiB writes for 3 s, the other reads.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    got = [0]

    def reader():
        conn, _ = listener.accept()
        while data := conn.recv(1 << 20):
            got[0] += len(data)
        conn.close()

    thread = threading.Thread(target=reader)
    thread.start()
    sender = socket.create_connection(listener.getsockname())
    block = b"\0" * (256 * 1024)
    t0 = now()
    while now() - t0 < 3:
        sender.sendall(block)
    sender.close()
    thread.join()
    listener.close()
    return got[0] / (now() - t0) / MB, "Python socket pair, one stream, 3 s"


# MARK: - Syncthing


def http(method, url, api_key, timeout=600):
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None,
                                     headers={"X-API-Key": api_key})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
    return json.loads(body) if body.strip().startswith((b"{", b"[")) else body


class SyncthingInstance:
    FOLDER = "bench"

    def __init__(self, home, name):
        self.home, self.name = home, name
        self.folder = os.path.join(home, "folder")
        self.port, self.gui_port = free_port(), free_port()
        self.api_key = secrets.token_hex(16)
        self.proc = None
        os.makedirs(self.folder)
        # The folder marker: without it Syncthing stops the folder ("folder marker missing").
        os.makedirs(os.path.join(self.folder, ".stfolder"))
        r = run(["syncthing", "generate", f"--home={home}", "--no-default-folder", "--skip-port-probing"])
        self.device_id = re.search(r"Device ID:\s*([A-Z0-9-]{63})", r.stdout + r.stderr).group(1)

    def configure(self, peer, folder_type, compression, dial_peer):
        """Rewrites the generated config.xml before the first start, so that nothing ever leaves
        loopback: no global or local discovery, relays, NAT traversal (UPnP/NAT-PMP), STUN,
        usage or crash reporting, upgrades; listen and GUI on 127.0.0.1 only."""
        path = os.path.join(self.home, "config.xml")
        tree = ET.parse(path)
        root = tree.getroot()
        options = root.find("options")

        def option(tag, value):
            element = options.find(tag)
            if element is None:
                element = ET.SubElement(options, tag)
            element.text = value

        for extra in options.findall("listenAddress")[1:]:
            options.remove(extra)
        option("listenAddress", f"tcp://127.0.0.1:{self.port}")
        option("globalAnnounceEnabled", "false")
        option("localAnnounceEnabled", "false")
        option("relaysEnabled", "false")
        option("natEnabled", "false")
        option("urAccepted", "-1")          # usage reporting declined
        option("urSeen", "3")
        option("crashReportingEnabled", "false")
        option("autoUpgradeIntervalH", "0")
        option("stunKeepaliveStartS", "0")  # 0 disables STUN
        option("announceLANAddresses", "false")
        option("startBrowser", "false")
        # Syncthing lowers its own CPU and I/O priority by default; the other tools run at the
        # normal priority, so it does too here.
        option("setLowPriority", "false")
        gui = root.find("gui")
        gui.find("address").text = f"127.0.0.1:{self.gui_port}"
        gui.find("apikey").text = self.api_key

        defaults = root.find("defaults")
        for element in root.findall("device") + root.findall("folder"):
            root.remove(element)
        # Both devices from the generated defaults (every field present), compression set on
        # both sides: a device's setting governs what is sent to it.
        for device_id, name, address in ((self.device_id, self.name, "dynamic"),
                                         (peer.device_id, peer.name,
                                          f"tcp://127.0.0.1:{peer.port}" if dial_peer else "dynamic")):
            device = ET.fromstring(ET.tostring(defaults.find("device")))
            device.set("id", device_id)
            device.set("name", name)
            device.set("compression", compression)
            device.find("address").text = address
            root.insert(0, device)
        # "dynamic" with discovery off: that side never dials, so one connection, dialed by the
        # receiver, carries everything.
        folder = ET.fromstring(ET.tostring(defaults.find("folder")))
        folder.set("id", self.FOLDER)
        folder.set("label", self.FOLDER)
        folder.set("path", self.folder)
        folder.set("type", folder_type)
        folder.set("rescanIntervalS", "0")        # no periodic scans: we ask for the one scan
        folder.set("fsWatcherEnabled", "false")   # ... so the clock starts when we say
        for element in folder.findall("device"):
            folder.remove(element)
        for device_id in (self.device_id, peer.device_id):
            ET.SubElement(folder, "device", {"id": device_id, "introducedBy": ""}).append(
                ET.fromstring("<encryptionPassword></encryptionPassword>"))
        root.insert(2, folder)
        tree.write(path)

    def start(self):
        env = dict(os.environ, STNORESTART="1", STNOUPGRADE="1", STNODEFAULTFOLDER="1")
        # --no-restart: no monitor process, so the pid is Syncthing itself (SIGKILL, VmHWM).
        self.proc = PROCS.start(["syncthing", "serve", f"--home={self.home}", "--no-browser", "--no-restart",
                                 "--no-upgrade"], os.path.join(self.home, "syncthing.log"), env=env)

    def api(self, method, path, timeout=600):
        return http(method, f"http://127.0.0.1:{self.gui_port}{path}", self.api_key, timeout)

    def ready(self):
        try:
            return self.api("GET", "/rest/system/ping", timeout=2) is not None
        except OSError:
            if self.proc.poll() is not None:
                raise RuntimeError(f"syncthing {self.name} exited; see {self.proc.log_path}")
            return False

    def folder_idle(self):
        try:
            return self.api("GET", f"/rest/db/status?folder={self.FOLDER}", timeout=2).get("state") == "idle"
        except OSError:
            return False


class SyncthingPair:
    """Sender a (send-only) and receiver b (receive-only), fresh homes for each case: a receiver
    that already held the file's blocks would copy them locally instead of pulling them."""

    def __init__(self, work, compression):
        self.a = SyncthingInstance(os.path.join(work, "a"), "sender")
        self.b = SyncthingInstance(os.path.join(work, "b"), "receiver")
        self.a.configure(self.b, "sendonly", compression, dial_peer=False)
        self.b.configure(self.a, "receiveonly", compression, dial_peer=True)

    def start(self):
        # The sender first: the receiver dials it at once, else only after a back-off.
        self.a.start()
        wait_until(self.a.ready, 60, 0.05, "syncthing sender's REST API")
        self.b.start()
        wait_until(self.b.ready, 60, 0.05, "syncthing receiver's REST API")
        wait_until(self.connected, 60, 0.05, "the syncthing instances to connect")
        wait_until(lambda: self.a.folder_idle() and self.b.folder_idle(), 60, 0.05, "the folders to be idle")

    def connected(self):
        try:
            connections = self.a.api("GET", "/rest/system/connections", timeout=2)["connections"]
            return connections.get(self.b.device_id, {}).get("connected")
        except OSError:
            return False

    def sender_out_bytes(self):
        """Syncthing's own count of what the sender wrote to its connections (after compression,
        before TLS), for the JSON as a cross-check of the iptables figure."""
        try:
            return self.a.api("GET", "/rest/system/connections", timeout=5)["total"]["outBytesTotal"]
        except (OSError, KeyError):
            return None

    def stop(self):
        for instance in (self.b, self.a):
            if instance.proc:
                PROCS.stop(instance.proc)


def syncthing_case(bench, case, src, compression, resume=False):
    size = os.path.getsize(src)
    work = bench.case_dir(f"syncthing-{case}-{compression}")
    log(f"Syncthing, {case}, compression {compression}{', resume' if resume else ''}: starting two instances")
    pair = SyncthingPair(work, compression)
    pair.start()
    bench.wire.watch(pair.a.port, pair.b.port)
    name = os.path.basename(src)
    final = os.path.join(pair.b.folder, name)
    partial = os.path.join(pair.b.folder, f".syncthing.{name}.tmp")
    # A hard link: the file is in the sender's folder at once, and the scan that we then ask
    # for is the moment it "appears" (no watcher, no periodic scan).
    os.link(src, os.path.join(pair.a.folder, name))
    os.sync()
    result = {"case": case, "tool": "Syncthing", "compression": compression, "sizeBytes": size}

    def arrived():
        try:
            return os.path.getsize(final) == size
        except FileNotFoundError:
            return False

    wire0 = bench.wire.sent(pair.a.port, pair.b.port)
    out0 = pair.sender_out_bytes()
    scanned = {}

    def scan():
        t = now()
        # Returns once the scan is done (hashing the file on the sender).
        pair.a.api("POST", f"/rest/db/scan?folder={SyncthingInstance.FOLDER}")
        scanned["seconds"] = now() - t

    t0 = now()
    scanner = threading.Thread(target=scan)
    scanner.start()
    if resume:
        # Kill the receiver once its partial file holds half the data (the temp file is sparse:
        # its allocated blocks are what it holds).
        try:
            wait_until(lambda: held_bytes(partial) >= size // 2 or arrived(), 600, 0.005, "half of the file")
        except TimeoutError:
            raise RuntimeError("syncthing receiver never held half the file")
        if arrived():
            log("  the file arrived before half could be seen; resume not measured (use a larger --size-mib)")
            result["resumeMissed"] = True
        else:
            PROCS.kill9(pair.b.proc)
            held_at_kill = result["heldAtKillBytes"] = held_bytes(partial)
            wire_restart = bench.wire.sent(pair.a.port, pair.b.port)
            if wire_restart is not None:
                result["wireBeforeRestartBytes"] = wire_restart - wire0
            t_restart = now()
            pair.b.start()
            # Two views of "moving again", polled together: the sender has sent FLOW_BYTES more
            # (the figure in the table), and the partial file holds a block (128 KiB) more.
            threshold = min(FLOW_BYTES, max(1, (size - held_at_kill) // 4))
            # The wire is watched until it shows the flow even if the file arrives first (a small
            # file can, between two polls): its counter only grows, so the next poll sees it.
            t_flow = t_file = None
            while (t_flow is None and bench.wire.available or t_file is None and not arrived()) \
                    and now() - t_restart < 600:
                if t_file is None and held_bytes(partial) >= held_at_kill + 128 * 1024:
                    t_file = now()
                if t_flow is None and bench.wire.available and \
                        bench.wire.sent(pair.a.port, pair.b.port) - wire_restart >= threshold:
                    t_flow = now()
                time.sleep(0.01)
            if t_flow:
                result["restartToFlowSeconds"] = t_flow - t_restart
            if t_file:
                result["restartToFileGrowsSeconds"] = t_file - t_restart
    wait_until(arrived, 1800, 0.01, "the file at the receiver")
    t1 = now()
    scanner.join()
    result["seconds"] = t1 - t0
    result["scanSeconds"] = scanned.get("seconds")
    result["MBps"] = size / result["seconds"] / MB
    wire1 = bench.wire.sent(pair.a.port, pair.b.port)
    if wire1 is not None:
        result["wireBytes"] = wire1 - wire0
        result["wireRatio"] = result["wireBytes"] / size
    out1 = pair.sender_out_bytes()
    if out0 is not None and out1 is not None:
        result["syncthingOutBytes"] = out1 - out0
    result["receiverPeakRSSMB"] = vm_hwm_mb(pair.b.proc.pid)
    bad = loopback_only([pair.a.proc.pid, pair.b.proc.pid])
    if bad:
        log("  WARNING: syncthing sockets off loopback:\n    " + "\n    ".join(bad))
        result["offLoopbackSockets"] = bad
    pair.stop()
    result["verified"] = blake2b_file(final) == bench.hashes[src]
    if not result["verified"]:
        log("  WARNING: the received file differs from the source")
    if not bench.args.keep:
        shutil.rmtree(work, ignore_errors=True)
    bench.report(result)
    return result


# MARK: - rsync over ssh


class SSHServer:
    """An sshd of our own on a loopback port, with a throwaway host key and client key. Even
    where a system sshd runs, ours is used: its port is known (for the wire counters), and the
    user's authorized_keys stays untouched."""

    def __init__(self, work):
        self.dir = os.path.join(work, "ssh")
        os.makedirs(self.dir, mode=0o700)
        self.port = free_port()
        self.user = getpass.getuser()
        host_key, self.client_key = os.path.join(self.dir, "host_ed25519"), os.path.join(self.dir, "client_ed25519")
        for key in (host_key, self.client_key):
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key])
        shutil.copy(self.client_key + ".pub", os.path.join(self.dir, "authorized_keys"))
        config = os.path.join(self.dir, "sshd_config")
        with open(config, "w") as f:
            f.write(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {host_key}
AuthorizedKeysFile {self.dir}/authorized_keys
PidFile {self.dir}/sshd.pid
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
""")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        run([sshd, "-t", "-f", config])
        self.proc = PROCS.start([sshd, "-D", "-e", "-f", config], os.path.join(self.dir, "sshd.log"))
        self.ssh = ["ssh", "-p", str(self.port), "-i", self.client_key, "-o", "IdentitiesOnly=yes",
                    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "LogLevel=ERROR"]
        wait_until(lambda: run(self.ssh + [f"{self.user}@127.0.0.1", "true"], check=False, timeout=10).returncode == 0,
                   30, 0.2, "our sshd to accept the key")

    def stop(self):
        PROCS.stop(self.proc)


def rsync_case(bench, case, src):
    size = os.path.getsize(src)
    ssh = bench.sshd()
    bench.wire.watch(ssh.port)
    destination = bench.case_dir(f"rsync-{case}")
    log(f"rsync -z --compress-choice=zstd over ssh, {case}")
    os.sync()
    wire0 = bench.wire.read()
    t0 = now()
    run(["rsync", "-z", "--compress-choice=zstd", "-e", " ".join(ssh.ssh), src,
         f"{ssh.user}@127.0.0.1:{destination}/"], timeout=3600)
    seconds = now() - t0
    wire1 = bench.wire.read()
    result = {"case": case, "tool": "rsync", "sizeBytes": size, "seconds": seconds, "MBps": size / seconds / MB}
    if bench.wire.available:
        # The client dials our sshd: what it sends goes to the sshd's port.
        result["wireBytes"] = wire1.get(("dpt", ssh.port), 0) - wire0.get(("dpt", ssh.port), 0)
        result["wireRatio"] = result["wireBytes"] / size
    received = os.path.join(destination, os.path.basename(src))
    result["verified"] = blake2b_file(received) == bench.hashes[src]
    shutil.rmtree(destination, ignore_errors=True)
    bench.report(result)
    return result


# MARK: - Weft


def weft_supports_content(weft):
    if not weft or not os.access(weft, os.X_OK):
        return False
    return subprocess.run([weft, "download", "--help"], capture_output=True).returncode == 0


class WeftNode:
    def __init__(self, weft, home, name, listen_port, peer_port=None):
        self.weft, self.home, self.name = weft, home, name
        self.port, self.peer_port = listen_port, peer_port
        self.proc = None

    def cli(self, *args, timeout=120, check=True):
        return run([self.weft, *args, "--home", self.home], timeout=timeout, check=check)

    def start(self):
        argv = [self.weft, "node", "--home", self.home, "--listen", f"127.0.0.1:{self.port}", "--log-level", os.environ.get("WEFT_BENCH_LOG_LEVEL", "info")]
        if self.peer_port:
            argv += ["--peer", f"127.0.0.1:{self.peer_port}"]
        self.proc = PROCS.start(argv, self.home + ".log")

    def wait_ready(self):
        # Prints "ready" once the node answers on its control socket.
        self.cli("wait", "--node", "--timeout", "60", timeout=90)


class WeftPair:
    """Sender a listens; receiver b dials it (--peer). Both listen on fixed loopback ports, so
    a restarted receiver comes back on the same port and the wire counters keep counting."""

    def __init__(self, weft, work):
        home_a, home_b = os.path.join(work, "a"), os.path.join(work, "b")
        # Each init warns that the key is unprotected (as asked).
        run([weft, "init", "--home", home_a, "--name", "sender", "--no-passphrase", "--new-mesh"])
        run([weft, "init", "--home", home_b, "--name", "receiver", "--no-passphrase",
             "--mesh-key-file", os.path.join(home_a, "mesh.key")])
        self.a = WeftNode(weft, home_a, "sender", free_port())
        self.b = WeftNode(weft, home_b, "receiver", free_port(), peer_port=self.a.port)

    def start(self):
        self.a.start()
        self.a.wait_ready()
        self.b.start()
        self.b.wait_ready()
        receiver_id = self.b.cli("id").stdout.strip().split()[-1]
        wait_until(lambda: receiver_id in self.a.cli("peers", "--json", check=False).stdout, 60, 0.1,
                   "the weft nodes to connect")
        self.conversation = self.a.cli("conv", "new", receiver_id).stdout.strip().split()[-1]

    def stop(self):
        for node in (self.b, self.a):
            if node.proc:
                PROCS.stop(node.proc)


class Download:
    """`weft download MSG --out PATH --json` on the receiver, its progress lines read as they
    come. The line format is the download command's: the verified bytes are taken from the
    first field found of a few likely names, or from a fraction times the size."""

    BYTE_FIELDS = ("verifiedBytes", "bytesDone", "doneBytes", "completedBytes", "bytesVerified", "bytes")
    FRACTION_FIELDS = ("fraction", "fractionCompleted", "progress")

    def __init__(self, node, message, out, size):
        self.size = size
        self.verified = 0
        self.lines = []
        self.proc = PROCS.start_piped([node.weft, "download", message, "--out", out, "--json", "--home", node.home],
                                      node.home + ".download.log")
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            value = self.progress_of(record)
            if value is not None:
                self.verified = max(self.verified, value)

    def progress_of(self, record):
        for nested in (record, record.get("progress") if isinstance(record.get("progress"), dict) else None):
            if not nested:
                continue
            for field in self.BYTE_FIELDS:
                if isinstance(nested.get(field), (int, float)):
                    return nested[field]
            for field in self.FRACTION_FIELDS:
                if isinstance(nested.get(field), (int, float)) and 0 <= nested[field] <= 1:
                    return nested[field] * self.size
        return None

    def wait(self, timeout=3600):
        code = self.proc.wait(timeout)
        self.reader.join(5)
        PROCS.forget(self.proc)
        return code

    def error(self):
        with open(self.proc.log_path, errors="replace") as f:
            return f.read().strip()[-2000:]


def largest_file_held(directory):
    """What the biggest file under directory holds (allocated blocks): the receiver's pre-sized
    partial file, when the progress lines say nothing we can read."""
    best = (0, 0)
    for parent, _, files in os.walk(directory):
        for name in files:
            try:
                st = os.stat(os.path.join(parent, name))
            except FileNotFoundError:
                continue
            best = max(best, (st.st_size, st.st_blocks * 512))
    return best[1]


def weft_case(bench, case, src, mime, resume=False):
    size = os.path.getsize(src)
    work = bench.case_dir(f"weft-{case}")
    log(f"Weft, {case}{', resume' if resume else ''}: starting two nodes")
    pair = WeftPair(bench.weft, work)
    pair.start()
    bench.wire.watch(pair.a.port, pair.b.port)
    out = os.path.join(work, "received")
    result = {"case": case, "tool": "Weft", "sizeBytes": size}
    os.sync()
    wire0 = bench.wire.sent(pair.a.port, pair.b.port)
    cpu0 = (cpu_seconds(pair.a.proc.pid), cpu_seconds(pair.b.proc.pid),
            cpu_seconds(pair.a.proc.pid, True), cpu_seconds(pair.b.proc.pid, True))
    t0 = now()
    message = pair.a.cli("send", pair.conversation, "--file", f"{os.path.abspath(src)}:{mime}",
                         timeout=3600).stdout.strip().split()[-1]
    result["sendSeconds"] = now() - t0
    pair.b.cli("wait", message, "--timeout", "120", timeout=180)
    download = Download(pair.b, message, out, size)

    def held():
        # The download's own progress, else what the largest file in the receiver's home holds
        # (its pre-sized partial file, if sparse) when the progress lines are not understood.
        if download.verified or not download.lines:
            return download.verified
        if not warned:
            log("  the download's progress lines name no verified bytes this harness knows; "
                "going by the receiver's largest file instead:", download.lines[-1][:200])
            warned.append(True)
        return largest_file_held(pair.b.home)

    warned = []

    if resume:
        try:
            wait_until(lambda: held() >= size // 2 or download.proc.poll() is not None, 600, 0.005, "half of the file")
        except TimeoutError:
            raise RuntimeError("weft receiver never held half the file")
        if download.proc.poll() is not None:
            log("  the download ended before half could be seen; resume not measured (use a larger --size-mib)")
            result["resumeMissed"] = True
        else:
            PROCS.kill9(pair.b.proc)
            result["heldAtKillBytes"] = held()
            try:
                download.wait(30)  # its node is gone: it ends with an error
            except subprocess.TimeoutExpired:
                PROCS.stop(download.proc)
            wire_restart = bench.wire.sent(pair.a.port, pair.b.port)
            if wire_restart is not None:
                result["wireBeforeRestartBytes"] = wire_restart - wire0
            t_restart = now()
            pair.b.start()
            threshold = min(FLOW_BYTES, max(1, (size - result["heldAtKillBytes"]) // 4))
            flow = {}
            watcher = threading.Thread(target=lambda: flow.update(t=wait_for_flow(
                bench.wire, pair.a.port, pair.b.port, wire_restart, threshold, 600)))
            watcher.start()
            # The node resumes by itself; the client only attaches to follow it to the end.
            pair.b.wait_ready()
            download = Download(pair.b, message, out, size)
            watcher.join()
            if flow.get("t"):
                result["restartToFlowSeconds"] = flow["t"] - t_restart
    code = download.wait()
    t1 = now()
    if code != 0:
        raise RuntimeError(f"weft download exited {code}: {download.error()}")
    result["seconds"] = t1 - t0
    result["MBps"] = size / result["seconds"] / MB
    wire1 = bench.wire.sent(pair.a.port, pair.b.port)
    if wire1 is not None:
        result["wireBytes"] = wire1 - wire0
        result["wireRatio"] = result["wireBytes"] / size
    result["receiverPeakRSSMB"] = vm_hwm_mb(pair.b.proc.pid)
    cpu1 = (cpu_seconds(pair.a.proc.pid), cpu_seconds(pair.b.proc.pid),
            cpu_seconds(pair.a.proc.pid, True), cpu_seconds(pair.b.proc.pid, True))
    if not resume and None not in cpu0 + cpu1:
        # CPU the two nodes used for the whole case (the receiver's copy to --out included),
        # and of it the kernel's (system) share.
        result["senderCPUSeconds"] = cpu1[0] - cpu0[0]
        result["receiverCPUSeconds"] = cpu1[1] - cpu0[1]
        result["senderSystemCPUSeconds"] = cpu1[2] - cpu0[2]
        result["receiverSystemCPUSeconds"] = cpu1[3] - cpu0[3]
    result["progressLines"] = len(download.lines)
    pair.stop()
    result["verified"] = blake2b_file(out) == bench.hashes[src]
    if not result["verified"]:
        log("  WARNING: the received file differs from the source")
    if not bench.args.keep:
        shutil.rmtree(work, ignore_errors=True)
    bench.report(result)
    return result


# MARK: - The run


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="weft-bench-content.")
        self.wire = Wire()
        if not self.wire.available:
            log(f"Bytes on the wire will not be counted: {self.wire.why}")
        self.hashes = {}
        self.results = []
        self._sshd = None
        self.weft = args.weft

    def case_dir(self, name):
        path = os.path.join(self.work, name)
        os.makedirs(path)
        return path

    def sshd(self):
        if self._sshd is None:
            self._sshd = SSHServer(self.work)
        return self._sshd

    def report(self, r):
        self.results.append(r)
        parts = [f"{r['seconds']:.2f} s", f"{r['MBps']:.0f} MB/s"]
        if "wireRatio" in r:
            parts.append(f"wire {r['wireRatio']:.3f}x")
        if "restartToFlowSeconds" in r:
            parts.append(f"flowing {r['restartToFlowSeconds']:.2f} s after restart")
        log(f"  {', '.join(parts)}")

    def cleanup(self):
        PROCS.stop_all()
        self.wire.remove()
        if self.args.keep:
            log(f"kept {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def print_report(bench, limits, size, weft_note, text_ratio, load):
    mib = size // MiB
    by = {}
    for r in bench.results:
        by.setdefault((r["case"], r["tool"], r.get("compression")), r)

    def syncthing_off(case):
        return by.get((case, "Syncthing", "never")) or by.get((case, "Syncthing", "metadata"))

    def goal(r):
        """The issue's goal for a Weft row, with yes/no; the relevant limit for the others."""
        case = r["case"]
        if r["tool"] != "Weft":
            if not limits:
                return ""
            if case == "text":
                return f"limit: zstd -1 {fmt(limits.get('zstd1_T1_MBps'), '.0f')} MB/s one core, " \
                       f"{fmt(limits.get('zstd1_T2_MBps'), '.0f')} two threads"
            if case in ("random", "memory"):
                return f"limit: {fmt(limits.get('random_two_core_MBps'), '.0f')} MB/s (encrypt + hash, two cores)"
            return ""
        if case == "text":
            rival = syncthing_off("text")
            faster = rival is None or r["MBps"] > rival["MBps"]
            third = r.get("wireRatio") is None or r["wireRatio"] <= GOAL_TEXT_WIRE_RATIO
            ok = r["MBps"] >= GOAL_TEXT_MBS and faster and third
            return f"goal ≥ {GOAL_TEXT_MBS} MB/s, faster than Syncthing uncompressed, about a third of the bytes " \
                   f"(≤ {GOAL_TEXT_WIRE_RATIO}x): {'met' if ok else 'missed'}"
        if case == "random":
            return f"goal ≥ {GOAL_RANDOM_MBS} MB/s: {'met' if r['MBps'] >= GOAL_RANDOM_MBS else 'missed'}"
        if case == "resume":
            ok = (r.get("wireRatio") or 99) <= GOAL_RESUME_RATIO and \
                 (r.get("restartToFlowSeconds") or 99) <= GOAL_RESUME_SECONDS
            return f"goal ≤ {GOAL_RESUME_RATIO}x and ≤ {GOAL_RESUME_SECONDS} s: {'met' if ok else 'missed'}"
        if case == "memory":
            rss = r.get("receiverPeakRSSMB")
            return f"goal receiver RSS < {GOAL_RSS_MB} MB: {'met' if rss is not None and rss < GOAL_RSS_MB else 'missed'}"
        return ""

    def note(r):
        bits = []
        if r["tool"] == "Syncthing":
            bits.append(f"compression {r['compression']}")
            if r.get("scanSeconds") is not None and r["case"] != "resume":
                bits.append(f"of which scan {r['scanSeconds']:.2f} s")
        if r["tool"] == "Weft" and r.get("sendSeconds") is not None and r["case"] != "resume":
            bits.append(f"of which send {r['sendSeconds']:.2f} s")
        if r.get("senderCPUSeconds") is not None:
            bits.append(f"CPU s sender {r['senderCPUSeconds']:.2f} (system {r['senderSystemCPUSeconds']:.2f}), "
                        f"receiver {r['receiverCPUSeconds']:.2f} (system {r['receiverSystemCPUSeconds']:.2f})")
        if r["case"] == "resume":
            if r.get("resumeMissed"):
                bits.append("finished before half: not measured")
            else:
                bits.append(f"killed holding {fmt((r.get('heldAtKillBytes') or 0) / size, '.2f')} of the file; "
                            f"whole transfer {r['seconds']:.2f} s")
        if r["case"] == "memory":
            bits.append(f"receiver peak RSS {fmt(r.get('receiverPeakRSSMB'), '.1f')} MB")
        if r.get("offLoopbackSockets"):
            bits.append("SOCKETS OFF LOOPBACK (see log)")
        if r.get("verified") is False:
            bits.append("RECEIVED FILE DIFFERS")
        return "; ".join(bits)

    label = {
        "text": f"text {mib} MiB (zstd -1 x{text_ratio:.2f})",
        "random": f"random {mib} MiB",
        "resume": f"resume, random {mib} MiB, receiver SIGKILLed at half (seconds: restart until flowing)",
        "memory": "random 1 GiB, receiver's peak RSS",
    }
    print()
    print(f"Content transfer on loopback, {os.cpu_count()} cores (load average {load:.2f} at the start); "
          f"MB = 10^6 bytes; wire = bytes the sender sent (IP and TCP headers included) / file size.")
    if not bench.wire.available:
        print(f"Bytes on the wire not counted: {bench.wire.why}.")
    print()
    print("| case | tool | seconds | MB/s | wire / file | goal (Weft) or limit | note |")
    print("|---|---|---|---|---|---|---|")
    for r in bench.results:
        seconds = r.get("restartToFlowSeconds") if r["case"] == "resume" else r["seconds"]
        mbps = None if r["case"] == "resume" else r["MBps"]
        print(f"| {label[r['case']]} | {r['tool']} | {fmt(seconds, '.2f')} | {fmt(mbps, '.0f')} | "
              f"{fmt(r.get('wireRatio'), '.3f')} | {goal(r)} | {note(r)} |")
    if weft_note:
        print(f"| all | Weft | - | - | - | - | {weft_note} |")
    if limits:
        print()
        print("| machine limit | value | how |")
        print("|---|---|---|")
        rows = [
            ("zstd -1 compression, one core", limits.get("zstd1_T1_MBps"), "MB/s",
             f"zstd -b1 on the text file (ratio x{fmt(limits.get('zstd1_ratio'), '.2f')})"),
            ("zstd -1 compression, two threads", limits.get("zstd1_T2_MBps"), "MB/s", "zstd -b1 -T2"),
            ("BLAKE2b, one core", limits.get("blake2b_MBps"), "MB/s", f"{limits.get('blake2b_impl')}, 256 KiB"),
            ("ChaCha20-Poly1305, one core", limits.get("chacha20poly1305_MBps"), "MB/s",
             f"{limits.get('chacha20poly1305_impl', 'libsodium not found')}, 256 KiB"),
            ("ChaCha20-Poly1305 (OpenSSL), one core", limits.get("openssl_chacha20poly1305_MBps"), "MB/s",
             "openssl speed -evp chacha20-poly1305, 256 KiB"),
            ("random data, two cores", limits.get("random_two_core_MBps"), "MB/s",
             "1 / (1/ChaCha20-Poly1305 + 1/BLAKE2b): each byte encrypted, decrypted and hashed twice"),
            ("loopback TCP", limits.get("loopback_tcp_MBps"), "MB/s", limits.get("loopback_tcp_how")),
        ]
        for name, value, unit, how in rows:
            if value is not None:
                print(f"| {name} | {value:.0f} {unit} | {how} |")


def main():
    parser = argparse.ArgumentParser(description="Content-transfer benchmark: Weft beside Syncthing and rsync.")
    parser.add_argument("--size-mib", type=int, default=256, help="size of each test file (default 256)")
    parser.add_argument("--memory", action="store_true", help="also a 1 GiB random file: the receiver's peak RSS")
    parser.add_argument("--only", default="limits,syncthing,rsync,weft",
                        help="comma-separated subset of limits,syncthing,rsync,weft")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH")
    parser.add_argument("--weft", metavar="PATH", help="the weft executable (./Tools/bench-content builds one)")
    parser.add_argument("--no-weft", action="store_true", help="leave Weft out")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - {"limits", "syncthing", "rsync", "weft"}
    if unknown:
        parser.error(f"unknown --only part: {', '.join(sorted(unknown))}")
    if args.no_weft:
        only.discard("weft")

    # SIGINT, SIGTERM and SIGHUP end the run through the finally below, which stops every
    # process. SIGINT too, explicitly: a shell starts background jobs with it ignored.
    def interrupted(signum, frame):
        raise KeyboardInterrupt
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, interrupted)

    bench = Bench(args)
    limits, weft_note = {}, None
    try:
        size = args.size_mib * MiB
        files = {"text": os.path.join(bench.work, "text.log"), "random": os.path.join(bench.work, "random.bin")}
        log(f"Making the test files ({args.size_mib} MiB each) in {bench.work}")
        write_text_file(files["text"], size)
        write_random_file(files["random"], size)
        if args.memory:
            files["memory"] = os.path.join(bench.work, "random-1g.bin")
            write_random_file(files["memory"], 1024 * MiB, seed=24)
        for path in files.values():
            bench.hashes[path] = blake2b_file(path)
        os.sync()
        # What zstd -1 makes of the text file (the limits measure its speed too; this is always there).
        compressed = subprocess.run(["zstd", "-1", "-c", files["text"]], capture_output=True, check=True).stdout
        text_ratio = size / len(compressed)
        del compressed
        load = os.getloadavg()[0]
        log(f"text file: zstd -1 x{text_ratio:.2f}; load average {load:.2f} on {os.cpu_count()} cores")

        if "limits" in only:
            log("Measuring the machine's limits")
            limits = measure_limits(files["text"], bench.work)

        weft_on = "weft" in only and weft_supports_content(bench.weft)
        if "weft" in only and not weft_on:
            weft_note = "Weft: rich content transfer not available in this build"
            log(weft_note)

        for case, mime in (("text", "text/plain"), ("random", "application/octet-stream")):
            if "syncthing" in only:
                syncthing_case(bench, case, files[case], "never")
                if case == "text":
                    syncthing_case(bench, case, files[case], "always")
            if "rsync" in only:
                rsync_case(bench, case, files[case])
            if weft_on:
                weft_case(bench, case, files[case], mime)
        if "syncthing" in only:
            syncthing_case(bench, "resume", files["random"], "metadata", resume=True)
        if weft_on:
            weft_case(bench, "resume", files["random"], "application/octet-stream", resume=True)
        if args.memory:
            if "syncthing" in only:
                syncthing_case(bench, "memory", files["memory"], "metadata")
            if weft_on:
                weft_case(bench, "memory", files["memory"], "application/octet-stream")
        if bench._sshd:
            bench._sshd.stop()

        print_report(bench, limits, size, weft_note, text_ratio, load)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({
                    "sizeBytes": size, "cores": os.cpu_count(), "loadAverageAtStart": load,
                    "textZstd1Ratio": text_ratio,
                    "wireMethod": "iptables counters on lo, per listening port (IP+TCP headers included)"
                                  if bench.wire.available else f"not counted: {bench.wire.why}",
                    "flowThresholdBytes": FLOW_BYTES,
                    "goals": {"textMBps": GOAL_TEXT_MBS, "textWireRatio": GOAL_TEXT_WIRE_RATIO,
                              "randomMBps": GOAL_RANDOM_MBS,
                              "resumeRatio": GOAL_RESUME_RATIO, "resumeSeconds": GOAL_RESUME_SECONDS,
                              "receiverRSSMB": GOAL_RSS_MB},
                    "limits": limits, "weft": weft_note or ("measured" if weft_on else "left out"),
                    "results": bench.results,
                }, f, indent=2)
            log(f"figures written to {args.json}")
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        bench.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
