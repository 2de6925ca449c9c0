/**
 * The KV stream between two members, one conversation a stream: the asker sends its model's content
 * identity, its llama.cpp build and its prompt's block chain (`prefix-chain.ts`); the holder
 * answers with an offer (the whole blocks it can give, the bytes and hash of that cut file, its own
 * prompt-reading rate) or a miss saying why; the asker says go or not, and on go the holder sends
 * exactly the offered bytes and ends the stream. Every frame is a claim checked by a schema.
 */
import { z } from "zod";
import { isBlockHash, MAX_BLOCKS } from "./prefix-chain.ts";

/** The asker's question must arrive whole within this (it is small). */
export const KV_ASK_MS = 5_000;
/** Either side gives up on a peer that sends or takes nothing for this long. */
export const KV_IDLE_MS = 10_000;
/** Fewer shared tokens than this are read again, never fetched: two blocks. */
export const MIN_SHARED_TOKENS = 128;

const Hex = (n: number) => z.string().length(n).regex(/^[0-9a-f]+$/);

export const KvAskSchema = z.strictObject({
  identity: Hex(64),
  build: z.string().min(1).max(200),
  chain: z.array(z.string().refine(isBlockHash, "not a block hash")).min(1).max(MAX_BLOCKS),
});
export type KvAsk = z.infer<typeof KvAskSchema>;

export const KvOfferSchema = z.strictObject({
  tokens: z.number().int().min(MIN_SHARED_TOKENS).max(MAX_BLOCKS * 64),
  bytes: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  sha256: Hex(64),
  /** The holder's prompt reading for the model, tokens per second, when it measured it. */
  prefillTps: z.number().positive().max(1e7).optional(),
});
export type KvOffer = z.infer<typeof KvOfferSchema>;

export const KvAnswerSchema = z.union([z.strictObject({ offer: KvOfferSchema }), z.strictObject({ miss: z.string().max(300) })]);
export type KvAnswer = z.infer<typeof KvAnswerSchema>;

export const KvGoSchema = z.strictObject({ go: z.boolean() });
