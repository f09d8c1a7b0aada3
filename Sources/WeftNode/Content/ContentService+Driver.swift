import DequeModule
import NIOCore
import WeftCrypto
import WeftModel
import WeftStore
import WeftSync
import WeftTransfer

extension ContentService {
    /// The download driver: the one owner of the transfer scheduler. Takes events from the
    /// queue one at a time and carries out each one's actions in order (sends queued on the
    /// connections, jobs started on the thread pool) before the next. Returns once the queue
    /// is closed.
    func drive() async {
        let driver = ContentDriver(service: self)
        while let event = await events.next() {
            await driver.handle(event)
        }
        driver.stop()
    }
}

/// The state the download driver owns (`ContentService.drive`): the scheduler, the downloads
/// and the connected peers. Not `Sendable`: one task uses it.
final class ContentDriver {
    typealias Core = TransferCore<ContentRoot, PublicIdentity>

    /// One content being fetched.
    struct Download {
        enum Phase: Equatable {
            /// Its partial content is being opened (or reopened).
            case opening
            /// Asking peers for its manifest, one at a time.
            case fetchingManifest
            /// The manifest arrived and is being written.
            case savingManifest
            /// The scheduler has it: chunks are asked for, verified and written.
            case transferring
            /// Every chunk is in: being completed on disk.
            case completing
            /// The disk is full (or failed): tried again at `retryAt`.
            case waitingForDisk
        }

        let descriptor: ContentDescriptor
        var phase: Phase = .opening
        var partial: PartialContent?
        var manifest: ContentManifest?
        /// The peer asked for the manifest, and when.
        var asked: (peer: PublicIdentity, at: UInt64)?
        /// Peers that did not have the manifest (or did not answer) since `lastReset`.
        var tried: Set<PublicIdentity> = []
        var lastReset: UInt64 = 0
        var retryAt: UInt64 = 0
        /// Chunks verified since peers that asked were last told.
        var chunksSinceTelling = 0

        var layout: TransferLayout {
            TransferLayout(totalByteCount: descriptor.byteCount, chunkByteCount: UInt32(descriptor.chunkByteCount))
        }
    }

    let service: ContentService
    var core: Core
    var downloads: [ContentRoot: Download] = [:]
    /// Wanted beyond the scheduler's bound, in order.
    var waiting = Deque<(descriptor: ContentDescriptor, mimeType: String?)>()
    var waitingRoots: Set<ContentRoot> = []
    /// Wants refused because too many waited (counted for the log).
    var refusedWants = 0
    /// The current connection of each content-capable peer.
    var peers: [PublicIdentity: ContentLink] = [:]
    /// Chunks asked of each peer and neither answered nor cancelled: the only chunks taken
    /// from it (at most the scheduler's window per peer), so that a peer cannot make the node
    /// verify chunks it did not ask for.
    var asked: [PublicIdentity: [ContentRoot: Set<Int>]] = [:]
    /// Messages to queue on connections once the event's state changes are made.
    var outgoing: [(ContentLink, ByteBuffer)] = []
    /// Contents being removed (retention), and what waits for their removal to end.
    var removals = Removals()
    let clockOrigin = ContinuousClock.now

    init(service: ContentService) {
        self.service = service
        core = Core(configuration: service.configuration.transfer)
    }

    var configuration: ContentConfiguration { service.configuration }

    /// Milliseconds since the driver started, monotonic: the scheduler's clock.
    var now: UInt64 {
        let elapsed = ContinuousClock.now - clockOrigin
        return UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    static func milliseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(0, duration.components.seconds)) * 1000 + UInt64(max(0, duration.components.attoseconds) / 1_000_000_000_000_000)
    }

    // MARK: - Events

    func handle(_ event: ContentEvent) async {
        switch event {
        case .want(let descriptor, let mimeType):
            want(descriptor, mimeType: mimeType)
        case .imported(let descriptor):
            imported(descriptor)
        case .connected(let link):
            connect(link)
        case .disconnected(let link):
            disconnect(link)
        case .received(let link, let message):
            receive(message, from: link)
        case .opened(let root, let outcome):
            opened(root, outcome)
        case .manifestSaved(let root, let manifest, let failure):
            manifestSaved(root, manifest, failure: failure)
        case .chunkChecked(let link, let root, let chunk, let outcome):
            checked(chunk, of: root, from: link, outcome)
        case .finished(let root, let outcome):
            finished(root, outcome)
        case .tick:
            tick()
        case .remove(let removal):
            remove(removal)
        case .removed(let removal, let targets, let removed):
            finishRemoval(removal, targets: targets, removed: removed)
        }
        await flush()
    }

    /// Queues what the event's handling sent, in order, on each message's connection.
    private func flush() async {
        let messages = outgoing
        outgoing = []
        for (link, payload) in messages { await link.send(payload) }
    }

    func stop() {
        for download in downloads.values { download.partial.map(service.closeInBackground) }
        downloads = [:]
    }

    // MARK: - Wanting

    func want(_ descriptor: ContentDescriptor, mimeType: String?) {
        let root = descriptor.root
        service.remember(mimeType: mimeType, of: root)
        // Wanted again while its files are being removed: after the removal, from scratch.
        guard !removals.holdBack(descriptor, mimeType: mimeType) else { return }
        guard downloads[root] == nil, !waitingRoots.contains(root), !service.board.isUpload(root) else { return }
        guard downloads.count < configuration.transfer.maxDownloads else {
            guard waiting.count < configuration.maxWaitingDownloads else {
                // One line for a run of them (a start may want thousands): the first, then every
                // thousandth. They are wanted again at the next start.
                refusedWants += 1
                if refusedWants % 1_000 == 1 {
                    service.logger.warning(
                        "not fetching content \(root) for now: \(waiting.count) contents wait already (\(refusedWants) refused so far; a restart wants them again)")
                }
                return
            }
            waiting.append((descriptor, mimeType))
            waitingRoots.insert(root)
            service.board.begin(root, totalBytes: descriptor.byteCount, status: .paused(reason: "waiting for other downloads"))
            return
        }
        start(descriptor)
    }

    private func start(_ descriptor: ContentDescriptor) {
        let root = descriptor.root
        downloads[root] = Download(descriptor: descriptor, lastReset: now)
        service.board.beginOpening(root, totalBytes: descriptor.byteCount)
        service.open(descriptor)
    }

    /// Starts what waits, while the scheduler has room.
    func startWaiting() {
        while downloads.count < configuration.transfer.maxDownloads, let next = waiting.popFirst() {
            waitingRoots.remove(next.descriptor.root)
            start(next.descriptor)
        }
    }

    /// Content added here: any download of it is over.
    private func imported(_ descriptor: ContentDescriptor) {
        let root = descriptor.root
        if waitingRoots.remove(root) != nil { waiting.removeAll { $0.descriptor.root == root } }
        guard let download = downloads.removeValue(forKey: root) else { return }
        if download.phase == .transferring || download.phase == .completing { perform(core.handle(.cancelled(root))) }
        forgetAsked(root)
        download.partial.map(service.closeInBackground)
        startWaiting()
    }

    // MARK: - Opening

    private func opened(_ root: ContentRoot, _ outcome: ContentEvent.OpenOutcome) {
        guard var download = downloads[root], download.phase == .opening else {
            if case .partial(let partial, _, _, _) = outcome, downloads[root]?.partial !== partial {
                service.closeInBackground(partial)
            }
            return
        }
        switch outcome {
        case .complete:
            complete(root)
        case .partial(let partial, let manifest, let heldBytes, let verified):
            download.partial = partial
            service.board.advance(root, verifiedBytes: heldBytes)
            downloads[root] = download
            if let manifest {
                transfer(root, manifest: manifest, verified: verified)
            } else {
                downloads[root]?.phase = .fetchingManifest
                askForManifest(root)
            }
        case .diskFull(let reason):
            waitForDisk(root, reason: reason)
        case .failed(let reason):
            fail(root, reason: reason)
        }
    }

    /// Hands a download whose manifest is held to the scheduler.
    private func transfer(_ root: ContentRoot, manifest: ContentManifest, verified: TransferChunkSet) {
        guard var download = downloads[root] else { return }
        download.manifest = manifest
        download.phase = .transferring
        download.asked = nil
        downloads[root] = download
        service.board.setStatus(root, .downloading)
        perform(core.handle(.wanted(root, download.layout, verified: verified)))
    }

    // MARK: - Manifests

    /// Asks the next peer for the download's manifest, unless one is asked and has time left.
    private func askForManifest(_ root: ContentRoot) {
        guard var download = downloads[root], download.phase == .fetchingManifest else { return }
        if let asked = download.asked {
            if peers[asked.peer] != nil, now - asked.at < ContentDriver.milliseconds(configuration.manifestTimeout) { return }
            download.tried.insert(asked.peer)
            download.asked = nil
        }
        let candidates = peers.keys.filter { !download.tried.contains($0) }.sorted()
        if candidates.isEmpty {
            service.board.setStatus(
                root, .paused(reason: peers.isEmpty ? "no peer is connected" : "no connected peer holds its manifest"))
        } else if let peer = candidates.first(where: { manifestsAsked(of: $0) < configuration.maxManifestsAskedPerPeer }) {
            // A peer keeps a few manifest requests (§17.8): the others wait their turn.
            download.asked = (peer, now)
            send(.manifestRequest(root), to: peer)
            service.board.setStatus(root, .downloading)
        }
        downloads[root] = download
    }

    /// Manifest requests in flight to `peer`.
    private func manifestsAsked(of peer: PublicIdentity) -> Int {
        downloads.values.reduce(0) { $0 + ($1.phase == .fetchingManifest && $1.asked?.peer == peer ? 1 : 0) }
    }

    /// Gives every download waiting for a manifest its turn (a request was answered).
    private func askForManifests() {
        for (root, download) in downloads where download.phase == .fetchingManifest && download.asked == nil {
            askForManifest(root)
        }
    }

    private func receiveManifest(_ root: ContentRoot, _ manifest: ContentManifest?, from link: ContentLink) {
        guard var download = downloads[root], download.phase == .fetchingManifest else { return }
        let peer = link.identity
        if download.asked?.peer == peer { download.asked = nil }
        defer { askForManifests() }
        guard let manifest else {
            download.tried.insert(peer)
            downloads[root] = download
            askForManifest(root)
            return
        }
        guard manifest.descriptor == download.descriptor else {
            // Same root, another size or chunk size: a lie the root does not catch (§17.8).
            download.tried.insert(peer)
            downloads[root] = download
            link.fail("a manifest of \(manifest.descriptor) for content described as \(download.descriptor)")
            askForManifest(root)
            return
        }
        download.phase = .savingManifest
        downloads[root] = download
        service.save(manifest)
    }

    private func manifestSaved(_ root: ContentRoot, _ manifest: ContentManifest, failure: String?) {
        guard let download = downloads[root], download.phase == .savingManifest else { return }
        if let failure {
            waitForDisk(root, reason: failure)
            return
        }
        let verified = download.partial.map { partial in
            TransferChunkSet(chunkCount: manifest.descriptor.chunkCount, chunks: partial.verifiedChunks.verified)
        }
        transfer(root, manifest: manifest, verified: verified ?? TransferChunkSet(chunkCount: manifest.descriptor.chunkCount))
        // Peers that asked may fetch the manifest from here now.
        service.holdMore(of: root, isComplete: false)
    }

    // MARK: - Peers

    private func connect(_ link: ContentLink) {
        if let old = peers[link.identity], old.number != link.number {
            asked[link.identity] = nil
            perform(core.handle(.disconnected(link.identity)))
        }
        peers[link.identity] = link
        perform(core.handle(.connected(link.identity)))
        for (root, download) in downloads where download.phase == .fetchingManifest {
            downloads[root]?.tried.remove(link.identity)
            askForManifest(root)
        }
    }

    private func disconnect(_ link: ContentLink) {
        guard peers[link.identity]?.number == link.number else { return }
        peers[link.identity] = nil
        asked[link.identity] = nil
        perform(core.handle(.disconnected(link.identity)))
        for (root, download) in downloads where download.phase == .fetchingManifest && download.asked?.peer == link.identity {
            downloads[root]?.asked = nil
            askForManifest(root)
        }
    }

    // MARK: - Messages

    private func receive(_ message: ContentTransferMessage, from link: ContentLink) {
        let isCurrent = peers[link.identity]?.number == link.number
        switch message {
        case .chunk(let chunk):
            receive(chunk, from: link, isCurrent: isCurrent)
        case .holdings(let root, let holdings) where isCurrent:
            guard let download = downloads[root] else { return }
            switch download.phase {
            case .fetchingManifest:
                // The peer holds something of it now (perhaps only the manifest): ask it.
                downloads[root]?.tried.remove(link.identity)
                askForManifest(root)
            case .transferring:
                let held: TransferHoldings
                switch holdings {
                case .none: held = .chunks(TransferChunkSet(chunkCount: download.descriptor.chunkCount))
                case .all: held = .all
                case .chunks(let set): held = .chunks(set)
                }
                perform(core.handle(.holdings(link.identity, root, held)))
            case .opening, .savingManifest, .completing, .waitingForDisk:
                break
            }
        case .manifest(let root, let manifest) where isCurrent:
            receiveManifest(root, manifest, from: link)
        case .notHeld(let root, let chunks) where isCurrent:
            guard downloads[root]?.phase == .transferring else { return }
            for chunk in chunks { perform(core.handle(.notHeld(link.identity, root, chunk: Int(chunk)))) }
        case .holdings, .manifest, .notHeld, .holdingsRequest, .manifestRequest, .chunkRequest, .cancel:
            break  // a replaced connection's, or requests (the servers take those)
        }
    }

    /// A chunk arrived (holding a verification slot): verified and written on the pool.
    private func receive(_ chunk: ChunkMessage, from link: ContentLink, isCurrent: Bool) {
        let wasAsked = asked[link.identity]?[chunk.root]?.remove(Int(chunk.index)) != nil
        if asked[link.identity]?[chunk.root]?.isEmpty == true { asked[link.identity]?[chunk.root] = nil }
        guard isCurrent, wasAsked, let download = downloads[chunk.root], download.phase == .transferring,
            let manifest = download.manifest, let partial = download.partial
        else {
            service.verifying.release()
            service.counters.withLock { $0.chunksIgnored += 1 }
            return
        }
        service.counters.withLock { $0.chunksReceived += 1 }
        service.board.addWire(chunk.root, bytes: chunk.frame.readableBytes)
        service.check(chunk, manifest: manifest, partial: partial, from: link)
    }

    private func checked(_ chunk: Int, of root: ContentRoot, from link: ContentLink, _ outcome: ContentEvent.ChunkOutcome) {
        guard downloads[root]?.phase == .transferring else { return }
        let peer = link.identity
        switch outcome {
        case .written(let heldBytes):
            service.counters.withLock { $0.chunksVerified += 1 }
            service.board.advance(root, verifiedBytes: heldBytes)
            downloads[root]?.chunksSinceTelling += 1
            if let count = downloads[root]?.chunksSinceTelling, count >= configuration.holdingsUpdateChunks {
                downloads[root]?.chunksSinceTelling = 0
                service.holdMore(of: root, isComplete: false)
            }
            perform(core.handle(.verified(peer, root, chunk: chunk)))
        case .duplicate:
            perform(core.handle(.verified(peer, root, chunk: chunk)))
        case .corrupt(let reason):
            service.counters.withLock { $0.corruptChunks += 1 }
            service.logger.warning("a corrupt chunk from \(peer): \(reason)")
            perform(core.handle(.corrupt(peer, root, chunk: chunk)))
        case .violation(let reason):
            service.counters.withLock { $0.corruptChunks += 1 }
            service.logger.warning("closing the connection with \(peer): \(reason)")
            perform(core.handle(.corrupt(peer, root, chunk: chunk)))
            link.fail(reason)
        case .diskFull(let reason), .failed(let reason):
            waitForDisk(root, reason: reason)
        case .closed:
            break
        }
    }

    // MARK: - The scheduler's actions

    func perform(_ actions: [TransferAction<ContentRoot, PublicIdentity>]) {
        for action in actions {
            switch action {
            case .ask(let peer, let root):
                send(.holdingsRequest(root), to: peer)
            case .request(let peer, let root, let chunks):
                asked[peer, default: [:]][root, default: []].formUnion(chunks)
                for start in stride(from: 0, to: chunks.count, by: ContentTransferMessage.maxChunkListCount) {
                    let part = chunks[start..<min(start + ContentTransferMessage.maxChunkListCount, chunks.count)]
                    send(.chunkRequest(root, chunks: part.map { UInt32($0) }), to: peer)
                }
            case .cancel(let peer, let root, let chunks):
                asked[peer]?[root]?.subtract(chunks)
                if asked[peer]?[root]?.isEmpty == true { asked[peer]?[root] = nil }
                for start in stride(from: 0, to: chunks.count, by: ContentTransferMessage.maxChunkListCount) {
                    let part = chunks[start..<min(start + ContentTransferMessage.maxChunkListCount, chunks.count)]
                    send(.cancel(root, chunks: part.map { UInt32($0) }), to: peer)
                }
            case .progress:
                break  // progress counts journaled chunks (`ChunkOutcome.written`), as the store holds them
            case .completed(let root):
                guard let partial = downloads[root]?.partial else { continue }
                downloads[root]?.phase = .completing
                service.complete(partial, root: root)
            case .paused(let root, let reason):
                service.board.setStatus(root, .paused(reason: reason.description))
            case .resumed(let root):
                service.board.setStatus(root, .downloading)
            case .failed(let root, let failure):
                fail(root, reason: failure.description)
            case .penalize(let peer, let badChunks):
                guard let link = peers[peer] else { continue }
                service.logger.warning("closing the connection with \(peer): it sent \(badChunks) chunks that failed verification")
                link.fail("\(badChunks) chunks failed verification")
            }
        }
    }

    private func send(_ message: ContentTransferMessage, to peer: PublicIdentity) {
        guard let link = peers[peer] else { return }
        do {
            outgoing.append((link, try SyncMessage.content(message).payload()))
        } catch {
            // Lists are cut to fit: a bug of ours if not, and the peer is sent nothing broken.
            service.logger.error("cannot encode a \(message.type) message for \(peer): \(error)")
        }
    }

    // MARK: - Endings

    private func finished(_ root: ContentRoot, _ outcome: ContentEvent.CompletionOutcome) {
        guard downloads[root]?.phase == .completing else { return }
        switch outcome {
        case .complete:
            service.counters.withLock { $0.downloadsCompleted += 1 }
            complete(root)
        case .incomplete(let verified):
            // Chunks a failed flush took back: ask for them again.
            guard let manifest = downloads[root]?.manifest else { return }
            transfer(root, manifest: manifest, verified: verified)
        case .diskFull(let reason), .failed(let reason):
            waitForDisk(root, reason: reason)
        }
    }

    /// Forgets what was asked of peers for a download that is over.
    func forgetAsked(_ root: ContentRoot) {
        for peer in Array(asked.keys) { asked[peer]?[root] = nil }
    }

    /// The content is held whole: the download is over.
    private func complete(_ root: ContentRoot) {
        forgetAsked(root)
        guard let download = downloads.removeValue(forKey: root) else { return }
        service.board.complete(root, totalBytes: download.descriptor.byteCount)
        service.holdMore(of: root, isComplete: true)
        startWaiting()
    }

    private func fail(_ root: ContentRoot, reason: String) {
        forgetAsked(root)
        guard let download = downloads.removeValue(forKey: root) else { return }
        service.logger.warning("cannot fetch content \(root): \(reason)")
        service.board.fail(root, reason: reason)
        download.partial.map(service.closeInBackground)
        startWaiting()
    }

    /// The disk is full (or failed): the download stops asking, and tries again later from
    /// what the store holds verified.
    private func waitForDisk(_ root: ContentRoot, reason: String) {
        guard var download = downloads[root] else { return }
        if download.phase == .transferring || download.phase == .completing { perform(core.handle(.cancelled(root))) }
        service.logger.warning("content \(root) waits: \(reason)")
        download.phase = .waitingForDisk
        download.retryAt = now + ContentDriver.milliseconds(configuration.diskFullRetryInterval)
        downloads[root] = download
        service.board.setStatus(root, .paused(reason: reason))
    }

    // MARK: - Timer

    private func tick() {
        let now = self.now
        perform(core.handle(.tick(nowMilliseconds: now)))
        let retry = ContentDriver.milliseconds(configuration.manifestRetryInterval)
        for (root, download) in downloads {
            switch download.phase {
            case .fetchingManifest:
                if now - download.lastReset >= retry {
                    downloads[root]?.tried = []
                    downloads[root]?.lastReset = now
                }
                askForManifest(root)
            case .waitingForDisk where now >= download.retryAt:
                // Still paused until the store takes it again (opening it says so).
                downloads[root]?.phase = .opening
                service.open(download.descriptor)
            default:
                break
            }
        }
    }
}
