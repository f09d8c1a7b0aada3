import NIOCore
import WeftControl

/// Splits a control socket's bytes into frames with the sans-I/O `ControlFrame.read`; a bad
/// length surfaces as a `ControlFailure` error on the channel (SPEC.md §15.2).
struct ControlFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ControlFrame

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let frame = try ControlFrame.read(from: &buffer) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(frame))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData  // a partial frame at the end is dropped with the connection
    }
}

struct ControlFrameEncoder: MessageToByteEncoder {
    typealias OutboundIn = ControlFrame

    func encode(data: ControlFrame, out: inout ByteBuffer) throws {
        data.write(into: &out)
    }
}

extension Channel {
    /// Adds the control frame codec and wraps the channel for async use (on its event loop).
    func controlAsyncChannel() throws -> NIOAsyncChannel<ControlFrame, ControlFrame> {
        try pipeline.syncOperations.addHandler(ByteToMessageHandler(ControlFrameDecoder()))
        try pipeline.syncOperations.addHandler(MessageToByteHandler(ControlFrameEncoder()))
        return try NIOAsyncChannel(
            wrappingChannelSynchronously: self,
            configuration: .init(inboundType: ControlFrame.self, outboundType: ControlFrame.self))
    }
}
