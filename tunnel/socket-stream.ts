/**
 * A TCP or TLS socket as one mesh `Stream`, so a protocol written for QUIC streams (the model
 * transfer) runs unchanged over the direct path. One exchange per connection, as on a stream:
 * `finish` only says the request or answer is whole (the protocols read frames and sizes, never
 * the end of the stream); the socket closes when this side has both finished and stopped reading,
 * or at once on `reset`. Reads buffer at most HIGH_WATER bytes (the socket is paused beyond it), and a
 * write that the peer does not take within `writeStallMs` destroys the socket.
 */
import type { Socket } from "node:net";
import type { RecvSide, SendSide, Stream } from "../mesh/transport.ts";

const HIGH_WATER = 8 * 1024 * 1024;
/** As long as a model transfer's idle deadline: a peer that stops reading is given up on. */
export const SOCKET_WRITE_STALL_MS = 30_000;

export function socketStream(socket: Socket, early: Uint8Array = new Uint8Array(0), writeStallMs = SOCKET_WRITE_STALL_MS): Stream {
  const chunks: Uint8Array[] = early.length ? [early] : [];
  let buffered = early.length;
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  let finished = false;
  let stopped = false;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const closeIfDone = () => {
    if (finished && stopped) socket.end();
  };
  socket.on("data", (chunk: Buffer) => {
    if (stopped) return;
    chunks.push(chunk);
    buffered += chunk.length;
    if (buffered > HIGH_WATER) socket.pause();
    notify();
  });
  socket.on("end", () => {
    ended = true;
    notify();
  });
  socket.on("error", (err) => {
    failure ??= err;
    notify();
  });
  socket.on("close", () => {
    failure ??= ended ? undefined : new Error("the connection closed");
    ended = true;
    notify();
  });
  socket.resume();

  const read = async (buf: Uint8Array): Promise<number | null> => {
    while (!chunks.length) {
      if (failure) throw failure;
      if (ended || stopped) return null;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    // As much as is queued, not one chunk: TLS hands over 16 KiB records, and a reader that
    // writes each read to disk would otherwise make a write per record.
    let n = 0;
    while (n < buf.length && chunks.length) {
      const head = chunks[0]!;
      const take = Math.min(buf.length - n, head.length);
      buf.set(head.subarray(0, take), n);
      n += take;
      if (take === head.length) chunks.shift();
      else chunks[0] = head.subarray(take);
    }
    buffered -= n;
    if (buffered <= HIGH_WATER / 2 && socket.isPaused()) socket.resume();
    return n;
  };

  const recv: RecvSide = {
    read,
    async readExact(buf) {
      let got = 0;
      while (got < buf.length) {
        const n = await read(buf.subarray(got));
        if (n === null) throw new Error(`the connection ended after ${got} of ${buf.length} bytes`);
        got += n;
      }
    },
    async stop() {
      stopped = true;
      chunks.length = 0;
      buffered = 0;
      notify();
      closeIfDone();
    },
  };

  const send: SendSide = {
    writeAll(bytes) {
      if (failure) return Promise.reject(failure);
      if (socket.destroyed || !socket.writable) return Promise.reject(new Error("the connection closed"));
      if (socket.write(bytes)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const stall = setTimeout(() => {
          done();
          socket.destroy();
          reject(new Error(`the peer took nothing for ${writeStallMs} ms`));
        }, writeStallMs);
        const done = () => {
          clearTimeout(stall);
          socket.off("drain", drained);
          socket.off("close", closed);
        };
        const drained = () => (done(), resolve());
        const closed = () => (done(), reject(new Error("the connection closed")));
        socket.on("drain", drained);
        socket.once("close", closed);
      });
    },
    async finish() {
      finished = true;
      closeIfDone();
    },
    async reset() {
      finished = stopped = true;
      socket.destroy();
      notify();
    },
  };
  return { send, recv };
}
