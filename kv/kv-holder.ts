/**
 * The holder's side of the KV stream: a member asks for the KV of a prompt it is about to read, and
 * this node offers one of its saved slots that the prompt covers whole (every one of its blocks but
 * the last), cut to those blocks (`slot-layout.ts`), then sends exactly that on the member's go.
 *
 * What the member says is a claim: it gets an offer only for a model content this node has and the
 * member announces it serves, of this node's llama.cpp build, within one stream per member, a few
 * in all and a few asks a second per member; and only for a saved conversation its chain proves it
 * already has whole (a block hash covers every token before it). A prompt that shares only part of
 * a conversation gets the same miss as one that shares none, so asks reveal nothing of what a
 * conversation holds beyond what the asker already knows; and an ask never makes this node save a
 * conversation its server still holds. Every read has a deadline; a member that goes quiet or stops
 * taking bytes is dropped. A saved file that is not what was saved, or that the walk does not
 * follow, is never sent.
 */
import { closeSync, fstatSync, openSync } from "node:fs";
import type { Log } from "../base/log.ts";
import { shortId } from "../base/short-id.ts";
import { TimedRecv, TimedSend } from "../streams/read-deadline.ts";
import type { Stream } from "../streams/stream.ts";
import { readFrame, writeFrame } from "../streams/wire.ts";
import { KV_ASK_MS, KV_IDLE_MS, KvAskSchema, KvGoSchema, MIN_SHARED_TOKENS, type KvAnswer, type KvAsk } from "./kv-wire.ts";
import { BLOCK_TOKENS, chainOf, sharedBlocks } from "./prefix-chain.ts";
import { fileSource, pieceBytes, slotLayout, trimmed, type Piece, type SlotLayout } from "./slot-layout.ts";

/** KV streams one member may have open here at once, and all members together. */
export const KV_STREAMS_PER_MEMBER = 1;
export const KV_STREAMS_TOTAL = 4;
/**
 * Asks one member may make: this many at once, then one more every KV_ASK_REFILL_MS. A moved
 * conversation asks once a turn (a released replica's chats move together); an oracle asked
 * hundreds a second.
 */
export const KV_ASKS_BURST = 32;
export const KV_ASK_REFILL_MS = 125;
/** Members whose asks are counted at once (the most recent; members are few). */
const ASKERS_KEPT = 1_024;
/** Saved files looked at per ask (newest first), and walked files remembered. */
const FILES_PER_ASK = 32;
const LAYOUTS_KEPT = 64;

export interface KvHolding {
  /** The llama.cpp build this node runs; none (not known, or no caches kept): nothing is offered. */
  build: string | undefined;
  /** This node's saved slots of the model content `identity`, newest first (its server's idle slots saved first); none when no model here has it. */
  savedOf(identity: string): Promise<string[] | undefined>;
  /** Whether a saved slot is still what was saved (one that is not is dropped). */
  intact(path: string): Promise<boolean>;
  /** Whether `member` announces it serves a model of content `identity`. */
  servesContent(member: string, identity: string): boolean;
  /** Why `member` gets nothing at all here (a guest of the mesh); undefined when it may ask. */
  refuses?(member: string): string | undefined;
  /** This node's prompt reading for that content, tokens per second, when measured. */
  prefillTps(identity: string): number | undefined;
  log: Log;
}

export interface KvHolderCounters {
  offered: number;
  sent: number;
  sentBytes: number;
  missed: number;
}

interface Walked {
  layout: SlotLayout;
  chain: string[];
}

type Offer = { answer: KvAnswer; send?: { fd: number; pieces: Piece[]; size: number } };

export class KvHolder {
  readonly counters: KvHolderCounters = { offered: 0, sent: 0, sentBytes: 0, missed: 0 };
  private readonly open = new Map<string, number>();
  private total = 0;
  /** Walked files by path, size and time (a file's name is its tokens' hash; a newer save of them replaces it). */
  private readonly walked = new Map<string, Walked | null>();
  /** Each member's asks left and when it last had one back (a token bucket). */
  private readonly asks = new Map<string, { left: number; at: number }>();

  constructor(private readonly o: KvHolding) {}

  /** One member's KV stream, its kind byte read. Never throws. */
  async serve(member: string, stream: Stream): Promise<void> {
    const who = `member ${shortId(member)}`;
    const recv = new TimedRecv(stream.recv, KV_IDLE_MS, `${who}'s KV stream`);
    const send = new TimedSend(stream.send, KV_IDLE_MS, who);
    const release = this.admit(member);
    let offer: Offer | undefined;
    try {
      if (!release) {
        this.counters.missed++;
        await writeFrame(send, { miss: `busy: at most ${KV_STREAMS_PER_MEMBER} KV stream per member and ${KV_STREAMS_TOTAL} in all` } satisfies KvAnswer);
        await send.finish();
        return;
      }
      const ask = KvAskSchema.safeParse(await recv.within(KV_ASK_MS, "its KV ask", () => readFrame(recv)));
      offer = !ask.success
        ? { answer: { miss: "the ask is not one this node reads" } }
        : !this.mayAsk(member)
          ? { answer: { miss: `too many asks: ${KV_ASKS_BURST} at once, then ${1000 / KV_ASK_REFILL_MS} a second per member` } }
          : await this.offerFor(member, ask.data);
      await writeFrame(send, offer.answer);
      if (!offer.send) {
        this.counters.missed++;
        await send.finish();
        return;
      }
      this.counters.offered++;
      const go = KvGoSchema.safeParse(await recv.within(KV_ASK_MS, "its go", () => readFrame(recv)));
      if (go.success && go.data.go) {
        const src = fileSource(offer.send.fd, offer.send.size);
        let bytes = 0;
        for (const chunk of pieceBytes(src, offer.send.pieces)) {
          await send.writeAll(chunk);
          bytes += chunk.length;
        }
        this.counters.sent++;
        this.counters.sentBytes += bytes;
      }
      await send.finish();
    } catch (err) {
      this.o.log.debug("a member's KV stream ended early", { member: shortId(member), error: (err as Error).message });
      await send.reset(1).catch(() => undefined);
    } finally {
      if (offer?.send) closeSync(offer.send.fd);
      release?.();
    }
  }

  /** One ask of the member's bucket, when it has one left. */
  private mayAsk(member: string, now = performance.now()): boolean {
    const b = this.asks.get(member) ?? { left: KV_ASKS_BURST, at: now };
    const refilled = Math.min(KV_ASKS_BURST, b.left + Math.floor((now - b.at) / KV_ASK_REFILL_MS));
    const at = refilled === b.left ? b.at : now;
    this.asks.delete(member);
    this.asks.set(member, { left: Math.max(0, refilled - 1), at });
    if (this.asks.size > ASKERS_KEPT) this.asks.delete(this.asks.keys().next().value!);
    return refilled > 0;
  }

  private admit(member: string): (() => void) | undefined {
    const mine = this.open.get(member) ?? 0;
    if (mine >= KV_STREAMS_PER_MEMBER || this.total >= KV_STREAMS_TOTAL) return undefined;
    this.open.set(member, mine + 1);
    this.total++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.total--;
      const left = (this.open.get(member) ?? 1) - 1;
      if (left > 0) this.open.set(member, left);
      else this.open.delete(member);
    };
  }

  private async offerFor(member: string, ask: KvAsk): Promise<Offer> {
    const miss = (why: string): Offer => ({ answer: { miss: why } });
    const refused = this.o.refuses?.(member);
    if (refused !== undefined) return miss(refused);
    if (this.o.build === undefined) return miss("this node keeps no KV caches (--kv-cache-disk 0, or its llama.cpp build is not known)");
    if (ask.build !== this.o.build) return miss("another llama.cpp build: its KV is not this node's");
    if (!this.o.servesContent(member, ask.identity)) return miss("you do not announce a model of that content");
    const files = await this.o.savedOf(ask.identity);
    if (!files) return miss("no model of that content on this node");
    let best: { path: string; walked: Walked; blocks: number } | undefined;
    for (const path of files.slice(0, FILES_PER_ASK)) {
      const walked = this.walk(path);
      if (!walked) continue;
      // Only a conversation the prompt holds whole, and never its last block: a part of one would say
      // what the rest is not, and the last block is where the next turn's text may join the last
      // word (or the answer's tokens read back otherwise), so the offer never depends on it.
      const whole = walked.chain.length - 1;
      if (whole > 0 && sharedBlocks(ask.chain, walked.chain) >= whole && whole > (best?.blocks ?? 0)) best = { path, walked, blocks: whole };
    }
    const tokens = (best?.blocks ?? 0) * BLOCK_TOKENS;
    if (!best || tokens < MIN_SHARED_TOKENS) return miss(`no saved conversation here of ${MIN_SHARED_TOKENS} tokens or more is wholly within that prompt`);
    if (!(await this.o.intact(best.path))) return miss("the saved conversation was damaged; dropped it");
    let fd: number;
    try {
      fd = openSync(best.path, "r");
    } catch {
      return miss("the saved conversation is gone");
    }
    try {
      const size = fstatSync(fd).size;
      const cut = trimmed(best.walked.layout, tokens);
      const hasher = new Bun.CryptoHasher("sha256");
      for (const chunk of pieceBytes(fileSource(fd, size), cut.pieces)) hasher.update(chunk);
      const tps = this.o.prefillTps(ask.identity);
      return { answer: { offer: { tokens, bytes: cut.bytes, sha256: hasher.digest("hex"), ...(tps !== undefined ? { prefillTps: tps } : {}) } }, send: { fd, pieces: cut.pieces, size } };
    } catch (err) {
      closeSync(fd);
      return miss(`the saved conversation could not be read: ${(err as Error).message}`);
    }
  }

  /** A saved file's layout and chain, walked once per version of it; null when the walk does not follow it. */
  private walk(path: string): Walked | null {
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch {
      return null;
    }
    try {
      const st = fstatSync(fd);
      const key = `${path}:${st.size}:${st.mtimeMs}`;
      const known = this.walked.get(key);
      if (known !== undefined) return known;
      let walked: Walked | null;
      try {
        const layout = slotLayout(fileSource(fd, st.size));
        walked = { layout, chain: chainOf(layout.tokens) };
      } catch (err) {
        this.o.log.debug("a saved slot is not one the mesh shares", { error: (err as Error).message });
        walked = null;
      }
      this.walked.set(key, walked);
      if (this.walked.size > LAYOUTS_KEPT) this.walked.delete(this.walked.keys().next().value!);
      return walked;
    } finally {
      closeSync(fd);
    }
  }
}
