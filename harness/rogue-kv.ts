/**
 * A member's side of the KV stream as an attacker plays it (issue 43), built from the node's own
 * wire modules: it answers a node's KV ask with the offer a test chose (a forged cache, a file with
 * a made-up layer, a claimed reading rate) and sends the bytes on the node's go; and the caches it
 * forges from a real one, with every K/V value's sign flipped (tokens, sizes and layout untouched,
 * so every structural check passes).
 */
import type { Stream } from "../streams/stream.ts";
import { readFrame, writeFrame } from "../streams/wire.ts";
import { KvAskSchema, KvGoSchema, type KvAsk, type KvOffer } from "../kv/kv-wire.ts";
import { bytesSource, pieceBytes, slotLayout, trimmed } from "../kv/slot-layout.ts";

/** What the rogue answers an ask with: an offer of these bytes (its claims as it makes them), or a miss. */
export type RogueKvAnswer = { offer: Omit<KvOffer, "bytes" | "sha256"> & Partial<Pick<KvOffer, "bytes" | "sha256">>; file: Uint8Array } | { miss: string };

/** What one KV stream from the node came to: its ask, and whether the node said go (undefined: it never said). */
export interface RogueKvExchange {
  ask: KvAsk | undefined;
  go: boolean | undefined;
  sent: number;
}

/** Serves one KV stream the node opened to the rogue (its kind byte read) with `answer`; never throws. */
export async function serveRogueKv(stream: Stream, answer: (ask: KvAsk) => RogueKvAnswer): Promise<RogueKvExchange> {
  const seen: RogueKvExchange = { ask: undefined, go: undefined, sent: 0 };
  try {
    const ask = KvAskSchema.safeParse(await readFrame(stream.recv));
    if (!ask.success) throw new Error("not an ask");
    seen.ask = ask.data;
    const a = answer(ask.data);
    if ("miss" in a) {
      await writeFrame(stream.send, { miss: a.miss });
      await stream.send.finish();
      return seen;
    }
    const offer: KvOffer = { bytes: a.file.length, sha256: new Bun.CryptoHasher("sha256").update(a.file).digest("hex"), ...a.offer };
    await writeFrame(stream.send, { offer });
    const go = KvGoSchema.safeParse(await readFrame(stream.recv));
    seen.go = go.success && go.data.go;
    if (seen.go) {
      for (let at = 0; at < a.file.length; at += 1 << 20) {
        await stream.send.writeAll(a.file.subarray(at, at + (1 << 20)));
        seen.sent = Math.min(a.file.length, at + (1 << 20));
      }
    }
    await stream.send.finish();
  } catch {
    await stream.send.reset(2).catch(() => undefined);
  }
  return seen;
}

/** A saved slot file cut to its first `tokens` tokens, as a holder sends it. */
export function cutSlot(file: Uint8Array, tokens: number): Uint8Array {
  const src = bytesSource(file);
  const cut = trimmed(slotLayout(src), tokens);
  const out = new Uint8Array(cut.bytes);
  let at = 0;
  for (const chunk of pieceBytes(src, cut.pieces)) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** ggml's float types and a quantized block's size: where the sign of each value (or of its block's scale) is. */
const FLOAT_BYTES: Readonly<Record<number, number>> = { 0: 4, 1: 2, 30: 2 };
const BLOCK_BYTES: Readonly<Record<number, number>> = { 2: 18, 3: 20, 6: 22, 7: 24, 8: 34, 20: 18 };

/**
 * A copy of a slot file with the sign of every K/V value flipped (a quantized block's scale: its
 * values with it). Finite, of the model's shape, the tokens it claims: only its numbers lie.
 */
export function signsFlipped(file: Uint8Array): Uint8Array {
  const out = file.slice();
  const view = new DataView(out.buffer, out.byteOffset, out.length);
  for (const stream of slotLayout(bytesSource(out)).streams) {
    for (const section of stream.sections) {
      const type = view.getInt32(section.headAt, true);
      const step = FLOAT_BYTES[type] ?? BLOCK_BYTES[type];
      if (step === undefined) throw new Error(`a layer of ggml type ${type}`);
      // A float's sign is its last byte's top bit; a block's scale is the f16 at its start.
      const signByte = FLOAT_BYTES[type] !== undefined ? step - 1 : 1;
      const bytes = section.transposed ? section.transposed.elBytes * section.transposed.embd * stream.cells : section.rowBytes * stream.cells;
      for (let o = section.dataAt + signByte; o < section.dataAt + bytes; o += step) out[o] = out[o]! ^ 0x80;
    }
  }
  return out;
}

/** The layers and the width of one token's K row (bytes) of a real slot file, as its model keeps them. */
export function slotShape(file: Uint8Array): { layers: number; kRowBytes: number; tokens: Int32Array } {
  const layout = slotLayout(bytesSource(file));
  const stream = layout.streams.find((s) => s.cells > 0);
  if (!stream) throw new Error("a slot file with no cells");
  return { layers: stream.sections.length / 2, kRowBytes: stream.sections[0]!.rowBytes, tokens: layout.tokens };
}
