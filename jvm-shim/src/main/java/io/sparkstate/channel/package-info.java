/**
 * The data path to one worker (docs/internals/bridge.md, "Data frames" and "transport=shm"): the frame
 * protocol ({@link io.sparkstate.channel.FramedDataChannel}, {@link io.sparkstate.channel.Frames}) and the
 * transports that move its frames (shared memory, Unix socket, py4j, embedded interpreter). Bytes in and out:
 * nothing here names a Spark type, so every Spark line's shim can share it. The shim reaches it through
 * {@link io.sparkstate.channel.DataChannel}, the transports' factories, {@link
 * io.sparkstate.channel.ScanChunk}, {@link io.sparkstate.channel.DataChannelException} and {@link
 * io.sparkstate.channel.CallTracker}.
 */
package io.sparkstate.channel;
