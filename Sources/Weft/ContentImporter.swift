import Foundation
import WeftModel

/// Where a client puts the rich content the local user sends (SPEC.md §17): a node's content
/// service, which chunks it, builds its manifest and keeps it whole for peers to fetch. The
/// message then carries only the descriptor.
public protocol ContentImporter: Sendable {
    /// Reads `file` chunk by chunk (never whole into memory) and keeps its content.
    func importContent(file: URL, mimeType: String) async throws -> ContentDescriptor
    /// Keeps `bytes` as content.
    func importContent(bytes: [UInt8], mimeType: String) async throws -> ContentDescriptor
}

extension WeftClient {
    /// Parts above `richContentThreshold` bytes as rich content, when the client has an
    /// importer; the rest as they are.
    func withRichContent(_ parts: [MessagePart]) async throws(WeftError) -> [MessagePart] {
        guard let importer = contentImporter, parts.contains(where: { $0.content == nil && $0.data.count > richContentThreshold }) else {
            return parts
        }
        var result: [MessagePart] = []
        for part in parts {
            guard part.content == nil, part.data.count > richContentThreshold, MessagePart.isValidMIMEType(part.mimeType) else {
                result.append(part)
                continue
            }
            do {
                result.append(MessagePart(mimeType: part.mimeType, content: try await importer.importContent(bytes: part.data, mimeType: part.mimeType)))
            } catch {
                throw .storage("cannot keep a part of \(part.data.count) bytes as rich content: \(error)")
            }
        }
        return result
    }

    /// A part made from `file`: inline when it is at most `richContentThreshold` bytes (or
    /// the client has no importer), else rich content read by the importer.
    public func part(fromFile file: URL, mimeType: String) async throws(WeftError) -> MessagePart {
        guard MessagePart.isValidMIMEType(mimeType) else { throw .invalidMIMEType(mimeType) }
        let size: Int
        do {
            let values = try file.resourceValues(forKeys: [.fileSizeKey, .isDirectoryKey])
            guard values.isDirectory != true else { throw WeftError.notPermitted("\(file.path) is a directory, not a file") }
            size = values.fileSize ?? 0
        } catch let error as WeftError {
            throw error
        } catch {
            throw .notPermitted("\(file.path) cannot be read: \(error.localizedDescription)")
        }
        if let importer = contentImporter, size > richContentThreshold {
            do {
                return MessagePart(mimeType: mimeType, content: try await importer.importContent(file: file, mimeType: mimeType))
            } catch {
                throw .storage("cannot keep \(file.path) as rich content: \(error)")
            }
        }
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw .notPermitted("\(file.path) cannot be read")
        }
        return MessagePart(mimeType: mimeType, data: [UInt8](data))
    }
}
