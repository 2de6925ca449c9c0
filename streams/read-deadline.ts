/**
 * Deadlines on a peer at the other end of a mesh stream. `TimedRecv`: a receive side whose every
 * read fails with `ReadTimeout` when no byte comes within the idle deadline, and `within` for a
 * whole piece (a frame, a request) that must arrive in full by a deadline of its own, so a peer
 * that goes quiet, or drips one byte at a time, cannot hold a fetch or a request forever.
 * `TimedSend`: a send side whose writes fail with `WriteTimeout` when the peer takes nothing for
 * the idle deadline, so a peer that never reads cannot hold what feeds the stream forever.
 *
 * The native binding serializes a stream's reads and `stop` behind one lock, and its writes,
 * `finish` and `reset` behind another, so a read or a write it is still waiting on cannot be
 * cancelled: after a timeout this side stops waiting, later reads (writes) fail at once, `stop`
 * (`reset`) is sent without being awaited, and the abandoned call ends with the stream or the
 * connection.
 */
import type { RecvSide, SendSide } from "./stream.ts";

/** The peer sent nothing (or not enough) in time; trying again elsewhere may help. */
export class ReadTimeout extends Error {}

/** The peer took nothing of what this side sent in time: it is not reading. */
export class WriteTimeout extends Error {}

export interface WithinOptions {
  /**
   * Whether the idle deadline still holds between reads inside the piece. Off (the default), the
   * piece's own deadline replaces it: a frame's first byte may rightly take long.
   */
  idle?: boolean;
}

export class TimedRecv implements RecvSide {
  /** When the piece being read under `within` must be complete (ms since the epoch). */
  private deadline = Number.POSITIVE_INFINITY;
  private deadlineWhat = "";
  private idleToo = false;
  private timedOut: ReadTimeout | undefined;

  /** `what` names the stream in errors ("node abc123's answer"). */
  constructor(
    private readonly inner: RecvSide,
    private readonly idleMs: number,
    private readonly what: string,
  ) {}

  /** Runs `read` (reads of this stream) under a total deadline of `ms`, in place of the idle one unless `opts.idle`. */
  async within<T>(ms: number, what: string, read: () => Promise<T>, opts: WithinOptions = {}): Promise<T> {
    const outer = { deadline: this.deadline, what: this.deadlineWhat, idleToo: this.idleToo };
    this.deadline = Math.min(outer.deadline, Date.now() + ms);
    this.idleToo = opts.idle ?? false;
    if (this.deadline !== outer.deadline) this.deadlineWhat = `${what} within ${formatMs(ms)}`;
    try {
      return await read();
    } finally {
      this.deadline = outer.deadline;
      this.deadlineWhat = outer.what;
      this.idleToo = outer.idleToo;
    }
  }

  async read(buf: Uint8Array): Promise<number | null> {
    if (this.timedOut) throw this.timedOut;
    const left = Number.isFinite(this.deadline) ? Math.max(0, this.deadline - Date.now()) : Number.POSITIVE_INFINITY;
    const idle = left === Number.POSITIVE_INFINITY || this.idleToo ? this.idleMs : Number.POSITIVE_INFINITY;
    const byIdle = idle <= left;
    const read = this.inner.read(buf);
    let timer: Timer | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => {
          const why = byIdle ? `sent nothing for ${formatMs(this.idleMs)}` : `did not send ${this.deadlineWhat}`;
          this.timedOut = new ReadTimeout(`${this.what} ${why}; gave up on it`);
          reject(this.timedOut);
        },
        Math.min(left, idle),
      );
    });
    try {
      return await Promise.race([read, expired]);
    } catch (err) {
      // The abandoned read settles later, when the stream or its connection ends.
      if (this.timedOut) read.catch(() => undefined);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async readExact(buf: Uint8Array): Promise<void> {
    for (let off = 0; off < buf.length; ) {
      const n = await this.read(buf.subarray(off));
      if (n === null) throw new Error(`${this.what} ended early`);
      off += n;
    }
  }

  stop(code: number): Promise<void> {
    const stopping = this.inner.stop(code);
    // Behind the abandoned read's lock: awaiting it would wait as long as that read does.
    if (!this.timedOut) return stopping;
    stopping.catch(() => undefined);
    return Promise.resolve();
  }
}

export class TimedSend implements SendSide {
  private timedOut: WriteTimeout | undefined;

  /** `what` names the peer in errors ("the node serving this model"). */
  constructor(
    private readonly inner: SendSide,
    private readonly idleMs: number,
    private readonly what: string,
  ) {}

  /** Fails when the peer takes none of `bytes` within the idle deadline (QUIC's flow control holds the rest back). */
  async writeAll(bytes: Uint8Array): Promise<void> {
    if (this.timedOut) throw this.timedOut;
    const write = this.inner.writeAll(bytes);
    let timer: Timer | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.timedOut = new WriteTimeout(`${this.what} took nothing for ${formatMs(this.idleMs)}; gave up on it`);
        reject(this.timedOut);
      }, this.idleMs);
    });
    try {
      await Promise.race([write, expired]);
    } catch (err) {
      // The abandoned write settles when the stream or its connection ends.
      if (this.timedOut) write.catch(() => undefined);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  finish(): Promise<void> {
    return this.timedOut ? Promise.reject(this.timedOut) : this.inner.finish();
  }

  reset(code: number): Promise<void> {
    const resetting = this.inner.reset(code);
    // Behind the abandoned write's lock: awaiting it would wait as long as that write does.
    if (!this.timedOut) return resetting;
    resetting.catch(() => undefined);
    return Promise.resolve();
  }
}

function formatMs(ms: number): string {
  return ms >= 1_000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`;
}
