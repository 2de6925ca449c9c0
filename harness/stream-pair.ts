/**
 * An in-memory bi-stream with QUIC's finish/reset/stop semantics, for tests of what runs over mesh
 * streams (model transfer, HTTP) without a transport.
 */
import type { RecvSide, SendSide, Stream } from "../streams/stream.ts";

/** One direction: what the writer sent and the reader has not taken yet. */
class Pipe {
  chunks: Uint8Array[] = [];
  finished = false;
  resetCode: number | undefined;
  stopCode: number | undefined;
  private waiter: (() => void) | undefined;
  wake() {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
  wait() {
    return new Promise<void>((r) => (this.waiter = r));
  }
  private drainWaiters: (() => void)[] = [];
  /** Resolves once the reader has taken everything written so far. */
  drained(): Promise<void> {
    if (this.chunks.length === 0) return Promise.resolve();
    return new Promise<void>((r) => this.drainWaiters.push(r));
  }
  tookAll() {
    if (this.chunks.length === 0) for (const r of this.drainWaiters.splice(0)) r();
  }
}

const pipes = new WeakMap<SendSide, Pipe>();

/** Resolves once the other end has read everything `send` (of a `streamPair`) wrote so far. */
export function drained(send: SendSide): Promise<void> {
  return pipes.get(send)?.drained() ?? Promise.resolve();
}

function sendSide(p: Pipe): SendSide {
  const send: SendSide = {
    async writeAll(bytes) {
      if (p.stopCode !== undefined) throw new Error(`stopped by peer with code ${p.stopCode}`);
      if (p.finished || p.resetCode !== undefined) throw new Error("write after finish or reset");
      p.chunks.push(bytes.slice());
      p.wake();
    },
    async finish() {
      if (p.resetCode !== undefined) throw new Error("finish after reset");
      p.finished = true;
      p.wake();
    },
    async reset(code) {
      if (p.finished && p.chunks.length === 0) return;
      // A reset drops whatever the reader has not taken yet.
      p.resetCode = code;
      p.chunks = [];
      p.wake();
    },
  };
  pipes.set(send, p);
  return send;
}

function recvSide(p: Pipe): RecvSide {
  const read = async (buf: Uint8Array): Promise<number | null> => {
    for (;;) {
      if (p.resetCode !== undefined) throw new Error(`reset by peer with code ${p.resetCode}`);
      if (p.stopCode !== undefined) throw new Error("read after stop");
      const head = p.chunks[0];
      if (head) {
        const n = Math.min(buf.length, head.length);
        buf.set(head.subarray(0, n));
        if (n === head.length) p.chunks.shift();
        else p.chunks[0] = head.subarray(n);
        p.tookAll();
        return n;
      }
      if (p.finished) return null;
      await p.wait();
    }
  };
  return {
    read,
    async readExact(buf) {
      for (let off = 0; off < buf.length; ) {
        const n = await read(buf.subarray(off));
        if (n === null) throw new Error("stream ended early");
        off += n;
      }
    },
    async stop(code) {
      if (p.finished && p.chunks.length === 0) return;
      p.stopCode = code;
      p.chunks = [];
      p.wake();
      p.tookAll();
    },
  };
}

export function streamPair(): [Stream, Stream] {
  const ab = new Pipe();
  const ba = new Pipe();
  return [
    { send: sendSide(ab), recv: recvSide(ba) },
    { send: sendSide(ba), recv: recvSide(ab) },
  ];
}
