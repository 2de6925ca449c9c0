/**
 * Moves bytes between a local TCP socket and a QUIC stream, both ways, with backpressure: the
 * socket is paused while too much waits for QUIC, and QUIC is read only as fast as the socket
 * drains. Whatever queued while a QUIC write was in flight goes out as one write (a write costs
 * ~0.1 ms in the binding, and llama.cpp sends a message in several small pieces). A TCP half-close
 * finishes the stream and the end of the stream half-closes the socket; an error on either side
 * resets the other.
 */
import type { Socket } from "node:net";
import type { RecvSide, SendSide } from "../streams/stream.ts";

/** Bytes queued for QUIC before the socket is paused. */
const HIGH_WATER = 4 * 1024 * 1024;
const READ_BUFFER = 256 * 1024;

export interface DirectionCounter {
  bytes: number;
}

/** `counter` itself, but saying when the first bytes pass (once). */
export function noticingFirst(counter: DirectionCounter, onFirst: () => void): DirectionCounter {
  let seen = false;
  return {
    get bytes() {
      return counter.bytes;
    },
    set bytes(value: number) {
      if (!seen) {
        seen = true;
        onFirst();
      }
      counter.bytes = value;
    },
  };
}

/** TCP -> QUIC. Resolves when the socket has ended and the stream is finished (or reset). */
export function socketToQuic(socket: Socket, send: SendSide, counter: DirectionCounter): Promise<void> {
  return new Promise((resolve) => {
    let queue: Uint8Array[] = [];
    let queued = 0;
    let writing = false;
    let ended = false;
    let failed = false;

    const flush = async () => {
      if (writing || failed) return;
      writing = true;
      try {
        while (queue.length) {
          const batch = queue.length === 1 ? queue[0]! : Buffer.concat(queue);
          queue = [];
          queued = 0;
          if (socket.isPaused()) socket.resume();
          await send.writeAll(batch);
          counter.bytes += batch.length;
        }
        if (ended) {
          await send.finish().catch(() => undefined);
          resolve();
        }
      } catch {
        failed = true;
        socket.destroy();
        resolve();
      } finally {
        writing = false;
      }
    };
    socket.on("data", (chunk: Buffer) => {
      queue.push(chunk);
      queued += chunk.length;
      if (queued > HIGH_WATER) socket.pause();
      void flush();
    });
    socket.on("end", () => {
      ended = true;
      void flush();
    });
    socket.on("error", () => {
      if (failed) return;
      failed = true;
      void send.reset(1).catch(() => undefined);
      resolve();
    });
    socket.on("close", () => {
      if (!ended && !failed) {
        failed = true;
        void send.reset(1).catch(() => undefined);
        resolve();
      }
    });
    // A socket paused earlier (while a path was chosen) does not flow by itself when read.
    socket.resume();
  });
}

function write(socket: Socket, chunk: Uint8Array): Promise<void> {
  // A destroyed socket returns false and never emits drain or close again: fail at once.
  if (socket.destroyed || !socket.writable) return Promise.reject(new Error("socket closed"));
  if (socket.write(chunk)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = () => {
      socket.off("drain", done);
      socket.off("close", closed);
      resolve();
    };
    const closed = () => {
      socket.off("drain", done);
      reject(new Error("socket closed"));
    };
    socket.on("drain", done);
    socket.once("close", closed);
  });
}

/** Something that may change the bytes on their way (the worker end's RPC rewriter). */
export interface ChunkRewriter {
  push(chunk: Uint8Array): Uint8Array[] | Promise<Uint8Array[]>;
}

/**
 * QUIC -> TCP, through `rewriter` when given. Resolves when the stream ended (the socket is
 * half-closed) or failed (the socket is destroyed; `onError` hears why). One read buffer is reused;
 * each read's bytes are copied out, since the socket holds written chunks until they are sent.
 */
export async function quicToSocket(recv: RecvSide, socket: Socket, counter: DirectionCounter, rewriter?: ChunkRewriter, onError?: (err: Error) => void): Promise<void> {
  const buf = new Uint8Array(READ_BUFFER);
  try {
    for (;;) {
      const n = await recv.read(buf);
      if (n === null) break;
      const chunk = buf.slice(0, n);
      const out = rewriter ? rewriter.push(chunk) : [chunk];
      for (const piece of out instanceof Promise ? await out : out) {
        counter.bytes += piece.length;
        await write(socket, piece);
      }
    }
    socket.end();
  } catch (err) {
    onError?.(err as Error);
    socket.destroy();
    await recv.stop(1).catch(() => undefined);
  }
}

/**
 * Socket -> socket, through `rewriter` when given (the direct path, where both ends are TCP or
 * TLS). `from` is paused while `to` is full or a rewrite is pending. Half-close carries over; an
 * error destroys both, and so does `from` closing without an end (destroyed: a peer gone, a
 * session closed), so `rpc-server` is not left serving a client that is no longer there.
 */
export function socketToSocket(from: Socket, to: Socket, counter: DirectionCounter, rewriter?: ChunkRewriter, onError?: (err: Error) => void): Promise<void> {
  return new Promise((resolve) => {
    let chain = Promise.resolve();
    const fail = (err: Error) => {
      onError?.(err);
      from.destroy();
      to.destroy();
      resolve();
    };
    const forward = (pieces: Uint8Array[]) => {
      for (const piece of pieces) {
        counter.bytes += piece.length;
        if (!to.write(piece)) {
          from.pause();
          to.once("drain", () => from.resume());
        }
      }
    };
    from.on("data", (chunk: Buffer) => {
      if (!rewriter) return forward([chunk]);
      let out: Uint8Array[] | Promise<Uint8Array[]>;
      try {
        out = rewriter.push(chunk);
      } catch (err) {
        return fail(err as Error);
      }
      if (!(out instanceof Promise)) {
        // Keep order behind a rewrite still pending.
        const pieces = out;
        chain = chain.then(() => forward(pieces));
        return;
      }
      from.pause();
      const pending = out;
      chain = chain.then(async () => {
        try {
          forward(await pending);
          from.resume();
        } catch (err) {
          fail(err as Error);
        }
      });
    });
    let ended = false;
    from.on("end", () => {
      ended = true;
      void chain.then(() => to.end());
    });
    from.on("error", (err) => fail(err));
    from.on("close", () =>
      void chain.then(() => {
        if (!ended) to.destroy();
        resolve();
      }),
    );
    from.resume();
  });
}
