/**
 * The asker's side: a conversation whose last turn another server of its model answered (the
 * router's hint, `x-mesh-kv-from`) comes here; before this node's server reads its prompt, the node
 * asks that member for the KV of the prompt's longest shared prefix, and fetches it when the rates
 * both sides measured say fetching beats reading (`fetch-decision.ts`). The file is data from a
 * member: it must be the size and hash offered, no larger than the node keeps, walk to its exact
 * end (`slot-layout.ts`) and hold exactly this prompt's first tokens before llama-server reads it.
 * Then it is kept as a saved slot of the model (`SlotCache.adopt`) and restored into an idle slot,
 * and the request is pinned to that slot. Anything that fails, or runs past the deadline of what
 * reading would have cost, leaves the request to be read whole, as without the mesh.
 */
import { closeSync, openSync, rmSync, statSync, writeSync } from "node:fs";
import { basename } from "node:path";
import type { Log } from "../base/log.ts";
import { shortId } from "../base/short-id.ts";
import type { SlotCache, SlotServer } from "../pool/slot-cache.ts";
import type { WrappedServer } from "../pool/wrapped-server.ts";
import { TimedRecv, TimedSend } from "../streams/read-deadline.ts";
import type { Stream } from "../streams/stream.ts";
import { readFrame, writeFrame } from "../streams/wire.ts";
import { fetchOrPrefill, MIN_DEADLINE_MS } from "./fetch-decision.ts";
import { KV_ASK_MS, KV_IDLE_MS, KvAnswerSchema, MIN_SHARED_TOKENS, type KvOffer } from "./kv-wire.ts";
import { BLOCK_TOKENS, chainOf } from "./prefix-chain.ts";
import { Rates } from "./rates.ts";
import { fileSource, slotLayout } from "./slot-layout.ts";
import { maxSlotBytes, outOfRange, shapeMismatch, type KvShape } from "./kv-shape.ts";

/** Fetches this node runs at once: more conversations moving at once are read again. */
const MAX_FETCHES = 2;
/** The longest a fetch may take, whatever a holder claims its reading costs. */
const MAX_FETCH_MS = 10_000;
/** Asking this node's server for a prompt's tokens, and for its slots. */
const SERVER_CALL_MS = 2_000;
/** A prefill rate is learnt only from requests that read at least this many tokens (shorter ones are mostly overhead). */
const MIN_RATE_TOKENS = 64;

export interface KvFollowParts {
  /** The llama.cpp build this node runs; none known: nothing is fetched. */
  build: string | undefined;
  /** A KV stream to a member (its kind byte sent); none when it is not one now. */
  open(member: string): Promise<Stream | undefined>;
  /**
   * Whether a member's KV of model content `identity` may be taken: only from a member trusted to
   * serve this node's clients the model, and that this node itself routed the conversation to
   * (`routed`), or one of the owner's machines, or one `--hosts` names: never on another member's
   * word alone (`node/kv-parts.ts`).
   */
  mayHold(member: string, identity: string, routed: boolean): boolean;
  slots: Pick<SlotCache, "adopt" | "sealFetched" | "restoreInto" | "keepBudget" | "fetchPath" | "discard" | "erase">;
  /**
   * Whether a cache from `member` may be kept as a saved slot (offered to members, restored at a
   * load, reused by later conversations): only one of the owner's machines'. Any other serves the
   * one request that fetched it, and its slot is emptied after.
   */
  keeps(member: string): boolean;
  /** The most bytes one fetched cache may have: the node's disk budget for saved slots. */
  maxBytes: number;
  /** The KV cache of model content `identity` as its GGUF says it must be (`kv-shape.ts`); none when it does not say. */
  shapeOf?(identity: string): KvShape | undefined;
  log: Log;
}

/** A server of this node as following needs it. */
export type FollowServer = SlotServer & Pick<WrappedServer, "fence">;

/** A cache restored for one request: its slot, and whether it is emptied (and the fence lifted) once that request is answered. */
export interface Followed {
  slot: number;
  /** Not one of the owner's machines' cache: it serves this request alone. */
  erase: boolean;
  /** Held from before the restore while `erase` (`WrappedServer.fence`); `lift` ends it, once the slot is emptied. */
  fence?: { held: Promise<void>; lift: () => void };
}

export interface KvFollowCounters {
  /** Caches fetched and restored; asked but none to give; weighed and read again; fetches that failed. */
  hits: number;
  misses: number;
  declined: number;
  failed: number;
  bytes: number;
  /** Estimated reading time the hits saved, ms. */
  savedMs: number;
}

/** Why a fetch stopped; the request is read whole. */
class FollowFailed extends Error {}

export class KvFollow {
  readonly counters: KvFollowCounters = { hits: 0, misses: 0, declined: 0, failed: 0, bytes: 0, savedMs: 0 };
  /** Prompt reading per model content, links per member, restores: what the decision weighs. */
  readonly rates = new Rates();
  private fetches = 0;
  /** Bytes of the fetches under way: they count against the disk budget before any is kept. */
  private receiving = 0;

  constructor(private readonly o: KvFollowParts) {}

  /** This node's prompt reading for a model content, tokens per second, when measured lately. */
  prefillTps = (identity: string): number | undefined => this.rates.get(`prefill:${identity}`);

  /** The request a cache from a member that is not one of the owner's machines was restored for is answered: its slot is emptied. */
  erase(server: FollowServer, slot: number): Promise<void> {
    return this.o.slots.erase(server, slot);
  }

  /** A request `server` answered read `tokens` of its prompt in `ms`: the model's reading rate. */
  answered(server: FollowServer, tokens: number | undefined, ms: number | undefined): void {
    const identity = identityOf(server);
    if (identity === undefined || tokens === undefined || ms === undefined || tokens < MIN_RATE_TOKENS) return;
    this.rates.add(`prefill:${identity}`, tokens, ms);
  }

  /**
   * Before `server` reads the request at llama-server's `path` with body `json`: fetches its prefix's
   * KV from `holder` when that is worth it and restores it into an idle slot; the slot, or none (the
   * request is read whole). Never throws.
   */
  async follow(server: FollowServer, path: string, json: unknown, holder: string, routed: boolean): Promise<Followed | undefined> {
    const identity = identityOf(server);
    if (identity === undefined || this.o.build === undefined || !server.slotDir || this.fetches >= MAX_FETCHES) return undefined;
    this.fetches++;
    const started = performance.now();
    let fence: Followed["fence"];
    try {
      const tokens = await promptTokens(server, path, json);
      if (!tokens || tokens.length < MIN_SHARED_TOKENS) return undefined;
      const slot = await idleSlot(server);
      if (slot === undefined) return undefined;
      const asked = performance.now();
      const got = await this.fetchFrom(holder, server.slotDir, identity, tokens, routed);
      if (!got) return undefined;
      // A cache for this request alone: no other request reaches llama-server from before it is restored until it is erased.
      if (!got.kept) {
        const lifted = Promise.withResolvers<void>();
        fence = { ...(await server.fence(lifted.promise)), lift: lifted.resolve };
      }
      const restoreStarted = performance.now();
      if (!(await this.o.slots.restoreInto(server, slot, got.path))) {
        this.o.slots.discard(got.path);
        throw new FollowFailed("llama-server did not take the fetched cache");
      }
      this.rates.add("restore", got.bytes, performance.now() - restoreStarted);
      // Only once llama-server took it does it count among the saved slots the budget keeps (and may push others out);
      // one held for this request alone goes now.
      if (got.kept) this.o.slots.keepBudget();
      else this.o.slots.discard(got.path);
      const phases = { tokenizeMs: Math.round(asked - started), fetchMs: Math.round(restoreStarted - asked), restoreMs: Math.round(performance.now() - restoreStarted), ...got.phases };
      this.counters.hits++;
      this.counters.bytes += got.bytes;
      this.counters.savedMs += Math.max(0, got.prefillMs - (performance.now() - started));
      this.o.log.info("a moved conversation's KV cache came from the member that held it", { model: server.model, from: shortId(holder), tokens: got.tokens, bytes: got.bytes, kept: got.kept, ms: Math.round(performance.now() - started), ...phases });
      return { slot, erase: !got.kept, ...(fence ? { fence } : {}) };
    } catch (err) {
      fence?.lift();
      this.counters.failed++;
      this.o.log.warn("could not fetch a moved conversation's KV cache; its prompt is read whole", { model: server.model, from: shortId(holder), error: (err as Error).message });
      return undefined;
    } finally {
      this.fetches--;
    }
  }

  /**
   * Asks `holder` for the KV of `tokens` (a prompt of model content `identity`), weighs its offer,
   * and receives and checks the file into `dir` (that model's slot folder); the saved slot it became,
   * or none (a miss, or declined). Throws when the fetch fails.
   */
  async fetchFrom(holder: string, dir: string, identity: string, tokens: Int32Array, routed = true): Promise<{ path: string; bytes: number; tokens: number; kept: boolean; prefillMs: number; phases: Record<string, number> } | undefined> {
    if (!this.o.mayHold(holder, identity, routed)) {
      this.o.log.debug("not asking for a conversation's KV a member this node did not route it to (nor one of the owner's machines, nor one --hosts names), that has not served its model lately, or is outside --hosts", { from: shortId(holder) });
      return undefined;
    }
    const stream = await this.o.open(holder).catch(() => undefined);
    if (!stream) throw new FollowFailed("the member that held it is not connected");
    const who = `member ${shortId(holder)}`;
    const recv = new TimedRecv(stream.recv, KV_IDLE_MS, `${who}'s KV answer`);
    const send = new TimedSend(stream.send, KV_IDLE_MS, who);
    let temp: string | undefined;
    let counted = 0;
    try {
      const asked = performance.now();
      await writeFrame(send, { identity, build: this.o.build, chain: chainOf(tokens) });
      // A holder slow to answer costs at most what reading the whole prompt here would.
      const ownTps = this.prefillTps(identity);
      const askMs = ownTps === undefined ? KV_ASK_MS : Math.min(KV_ASK_MS, Math.max(MIN_DEADLINE_MS, (tokens.length / ownTps) * 1000));
      const answer = KvAnswerSchema.safeParse(await recv.within(askMs, "an answer to its KV ask", () => readFrame(recv)));
      if (!answer.success) throw new FollowFailed("the member's answer is not one this node reads");
      if ("miss" in answer.data) {
        this.counters.misses++;
        this.o.log.debug("the member had no KV to give", { from: shortId(holder), why: answer.data.miss });
        await send.finish();
        return undefined;
      }
      const offer = answer.data.offer;
      const answerMs = performance.now() - asked;
      const refusal = offerRefusal(offer, tokens.length, this.o.maxBytes - this.receiving);
      if (refusal) throw new FollowFailed(refusal);
      // Before a byte is written: no more than this model's KV of so many tokens can take.
      const shape = this.o.shapeOf?.(identity);
      if (shape && offer.bytes > maxSlotBytes(shape, offer.tokens)) throw new FollowFailed(`the member offered ${offer.bytes} bytes for ${offer.tokens} tokens; this model's KV of them takes at most ${maxSlotBytes(shape, offer.tokens)}`);
      const verdict = fetchOrPrefill({
        tokens: offer.tokens,
        bytes: offer.bytes,
        ownPrefillTps: ownTps,
        linkBps: this.rates.get(`link:${holder}`),
        restoreBps: this.rates.get("restore"),
      });
      if (!verdict.fetch) {
        this.counters.declined++;
        this.o.log.debug("reading the prompt again instead of fetching its KV", { from: shortId(holder), why: verdict.why });
        await writeFrame(send, { go: false });
        await send.finish();
        return undefined;
      }
      await writeFrame(send, { go: true });
      await send.finish();
      temp = this.o.slots.fetchPath(dir);
      const receiveStarted = performance.now();
      this.receiving += offer.bytes;
      counted = offer.bytes;
      await recv.within(Math.min(MAX_FETCH_MS, verdict.deadlineMs), `the ${offer.bytes} bytes it offered`, () => receiveFile(recv, temp!, offer), { idle: true });
      const received = performance.now();
      this.rates.add(`link:${holder}`, offer.bytes, received - receiveStarted);
      checkTokens(temp, tokens, offer.tokens, shape);
      const keep = this.o.keeps(holder);
      const held = keep ? await this.o.slots.adopt(dir, temp, offer.sha256) : await this.o.slots.sealFetched(temp, offer.sha256);
      temp = undefined;
      const phases = { answerMs: Math.round(answerMs), receiveMs: Math.round(received - receiveStarted), checkMs: Math.round(performance.now() - received) };
      return { path: held.path, bytes: held.bytes, tokens: offer.tokens, kept: keep, prefillMs: verdict.prefillMs, phases };
    } catch (err) {
      await send.reset(1).catch(() => undefined);
      await recv.stop(1).catch(() => undefined);
      throw err;
    } finally {
      this.receiving -= counted;
      if (temp) rmSync(temp, { force: true });
    }
  }
}

/** A server's model content identity: the last part of the folder it saves slots in (`SlotCache.folderFor`). */
const identityOf = (server: FollowServer): string | undefined => (server.slotDir ? basename(server.slotDir) : undefined);

/** Why an offer is not one to take (pure): more tokens than the prompt, not whole blocks, more bytes than the node keeps. */
export function offerRefusal(offer: KvOffer, promptTokens: number, maxBytes: number): string | undefined {
  if (offer.tokens > promptTokens) return `the member offered ${offer.tokens} tokens of a ${promptTokens}-token prompt`;
  if (offer.tokens % BLOCK_TOKENS !== 0) return `the member offered ${offer.tokens} tokens, not whole blocks`;
  if (offer.bytes > maxBytes) return `the member offered ${offer.bytes} bytes, more than the ${maxBytes} this node keeps`;
  return undefined;
}

/** Receives exactly the offered bytes into `path` (a new file), hashing them; the stream must end right after. */
async function receiveFile(recv: TimedRecv, path: string, offer: KvOffer): Promise<void> {
  const fd = openSync(path, "wx", 0o600);
  try {
    const hasher = new Bun.CryptoHasher("sha256");
    const buf = new Uint8Array(1 << 20);
    let got = 0;
    while (got < offer.bytes) {
      const n = await recv.read(buf.subarray(0, Math.min(buf.length, offer.bytes - got)));
      if (n === null) throw new FollowFailed(`the member's stream ended after ${got} of ${offer.bytes} bytes`);
      writeSync(fd, buf, 0, n);
      hasher.update(buf.subarray(0, n));
      got += n;
    }
    if ((await recv.read(buf.subarray(0, 1))) !== null) throw new FollowFailed(`the member sent more than the ${offer.bytes} bytes it offered`);
    if (hasher.digest("hex") !== offer.sha256) throw new FollowFailed("the bytes the member sent are not those it offered (hash)");
  } finally {
    closeSync(fd);
  }
}

/** The fetched file must walk to its exact end, be of the model's shape, and hold exactly the prompt's first `count` tokens. */
function checkTokens(path: string, prompt: Int32Array, count: number, shape: KvShape | undefined): void {
  const fd = openSync(path, "r");
  try {
    const src = fileSource(fd, statSync(path).size);
    const layout = slotLayout(src);
    if (layout.tokens.length !== count) throw new FollowFailed(`the fetched cache holds ${layout.tokens.length} tokens, ${count} were offered`);
    for (let i = 0; i < count; i++) if (layout.tokens[i] !== prompt[i]) throw new FollowFailed(`the fetched cache's token ${i} is not the prompt's`);
    const typeAt = (at: number) => {
      const b = src.read(at, 4);
      return new DataView(b.buffer, b.byteOffset, 4).getInt32(0, true);
    };
    const mismatch = shape && shapeMismatch(layout, shape, typeAt);
    if (mismatch) throw new FollowFailed(`the fetched cache is not this model's: ${mismatch}`);
    const poisoned = outOfRange(src, layout, typeAt);
    if (poisoned) throw new FollowFailed(`the fetched cache's values are out of range: ${poisoned}`);
  } finally {
    closeSync(fd);
  }
}

async function serverJson(server: FollowServer, path: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${server.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { ...server.headers, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(SERVER_CALL_MS),
  });
  if (!res.ok) {
    await res.body?.cancel();
    throw new FollowFailed(`llama-server answered ${res.status} for ${path}`);
  }
  return res.json() as Promise<unknown>;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

/** Whether every message is text only: a prompt with media is read with its media, which a slot file does not carry. */
function textOnly(messages: unknown[]): boolean {
  return messages.every((m) => isObject(m) && (typeof m.content === "string" || m.content == null || (Array.isArray(m.content) && m.content.every((p) => isObject(p) && p.type === "text"))));
}

/**
 * The prompt's tokens as this node's server will read them: a chat through its own template
 * (`/apply-template`), then `/tokenize` as the server tokenizes a prompt (special tokens added and
 * parsed); a completion's string prompt directly. None for anything else (media, token lists).
 */
async function promptTokens(server: FollowServer, path: string, json: unknown): Promise<Int32Array | undefined> {
  if (!isObject(json)) return undefined;
  let prompt: string;
  if (path === "/v1/chat/completions" && Array.isArray(json.messages) && textOnly(json.messages)) {
    const applied = await serverJson(server, "/apply-template", json);
    if (!isObject(applied) || typeof applied.prompt !== "string") return undefined;
    prompt = applied.prompt;
  } else if ((path === "/v1/completions" || path === "/completion") && typeof json.prompt === "string") {
    prompt = json.prompt;
  } else return undefined;
  const tokenized = await serverJson(server, "/tokenize", { content: prompt, add_special: true, parse_special: true });
  if (!isObject(tokenized) || !Array.isArray(tokenized.tokens) || !tokenized.tokens.every((t) => Number.isInteger(t))) return undefined;
  return Int32Array.from(tokenized.tokens as number[]);
}

/** An idle slot of the server to restore into: the one holding the least. */
async function idleSlot(server: FollowServer): Promise<number | undefined> {
  const slots = await serverJson(server, "/slots", undefined);
  if (!Array.isArray(slots)) return undefined;
  const idle = slots.filter((s): s is { id: number; n_prompt_tokens?: number } => isObject(s) && Number.isInteger(s.id) && s.is_processing !== true);
  idle.sort((a, b) => (a.n_prompt_tokens ?? 0) - (b.n_prompt_tokens ?? 0));
  return idle[0]?.id;
}
