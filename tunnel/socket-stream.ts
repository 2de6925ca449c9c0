/**
 * A TCP or TLS socket as one mesh `Stream`, so a protocol written for QUIC streams (the model
 * transfer) runs unchanged over the direct path. One exchange per connection, as on a stream:
 * `finish` only says the request or answer is whole (the protocols read frames and sizes, never
 * the end of the stream); the socket closes when this side has both finished and stopped reading,
 * or at once on `reset`; a peer that does not close its side within END_GRACE_MS then is cut off.
 * Reads buffer at most HIGH_WATER bytes (the socket is paused beyond it), and a write during which
 * the peer takes nothing for `writeStallMs` destroys the socket.
 */
import type { Socket } from "node:net";
import type { RecvSide, SendSide, Stream } from "../streams/stream.ts";

const HIGH_WATER = 8 * 1024 * 1024;
/** As long as a model transfer's idle deadline: a peer that stops reading is given up on. */
export const SOCKET_WRITE_STALL_MS = 30_000;
/** How long a closed exchange waits for the peer's side to close before the socket is destroyed. */
export const END_GRACE_MS = 5_000;
/** A write's slice: at 1 Mbit/s one drains in ~2 s, well inside the stall deadline. */
const WRITE_SLICE = 256 * 1024;

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
    if (!finished || !stopped || socket.destroyed) return;
    socket.end();
    setTimeout(() => socket.destroy(), END_GRACE_MS).unref();
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
      // Paused, the socket would never see the peer's end or reset.
      socket.resume();
      notify();
      closeIfDone();
    },
  };

  const writeSlice = (bytes: Uint8Array): Promise<void> => {
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
  };

  const send: SendSide = {
    async writeAll(bytes) {
      // In slices, each with its own deadline: a stall is a peer that takes nothing, not a slow link
      // that takes a large write in more than the deadline.
      for (let at = 0; at < bytes.length; at += WRITE_SLICE) await writeSlice(bytes.subarray(at, at + WRITE_SLICE));
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
