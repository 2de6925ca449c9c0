/**
 * The llama-server arguments a load request may carry (pure): an allowlist of tuning flags, each
 * with its value checked (integers in ranges, decimals, fixed words), read the way the pinned
 * llama.cpp reads its command line. Anything else is refused naming the flag, and above all flags
 * whose value is a path, URL, JSON, command, host, port, key or prefix: a request's text must never
 * make llama-server read or write a file, fetch, listen or run something. Free-form arguments are
 * the operator's (`--llamacpp-args`, `models.json`) and never pass through here.
 */
import { canonicalFlag, managedFlagReason, ServerArgsError, splitArgs } from "./server-args.ts";

declare const checked: unique symbol;

/** Arguments that passed the allowlist, in canonical `--flag value` words: the only request text that reaches argv. */
export type RequestArgs = readonly string[] & { readonly [checked]: true };

/** Bounds on what a request may send, so a request's arguments stay a few tuning flags. */
export const MAX_REQUEST_ARGS_CHARS = 2048;
const MAX_REQUEST_ARGS_WORDS = 64;

export type Value =
  | { kind: "none" }
  /** An integer in range, or one of `words` (`-ngl auto`). */
  | { kind: "int"; min: number; max: number; words?: readonly string[] }
  | { kind: "decimal"; min: number; max: number }
  | { kind: "word"; words: readonly string[] };

export interface Flag {
  /** Every spelling llama.cpp accepts; the first is what goes on argv. */
  names: readonly string[];
  value: Value;
}

const none: Value = { kind: "none" };
const int = (min: number, max: number, words?: readonly string[]): Value => ({ kind: "int", min, max, words });
const decimal = (min: number, max: number): Value => ({ kind: "decimal", min, max });
const word = (...words: string[]): Value => ({ kind: "word", words });

const TOKENS = 2 ** 24;
const THREADS = int(-1, 1024);
const BATCH = int(1, 1 << 20);
/** The KV cache types the pinned llama.cpp accepts (`kv_cache_types` in common/arg.cpp). */
const CACHE_TYPES = word("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1");
const ON_OFF_AUTO = word("on", "off", "auto");
/**
 * Template names built into the pinned llama.cpp (`LLM_CHAT_TEMPLATES`). `--chat-template` also
 * takes template source, which is parsed and run: a request may pick a name, not send a program.
 */
const CHAT_TEMPLATES = word(
  ..."chatml llama2 llama2-sys llama2-sys-bos llama2-sys-strip mistral-v1 mistral-v3 mistral-v3-tekken mistral-v7 mistral-v7-tekken phi3 phi4 falcon3 zephyr monarch gemma orion openchat vicuna vicuna-orca deepseek deepseek2 deepseek3 deepseek-ocr command-r llama3 chatglm3 chatglm4 glmedge minicpm exaone3 exaone4 exaone-moe rwkv-world granite granite-4.0 granite-4.1 gigachat megrez yandex bailing bailing-think bailing2 llama4 smolvlm hunyuan-moe gpt-oss hunyuan-dense hunyuan-vl kimi-k2 seed_oss grok-2 pangu-embedded solar-open".split(" "),
);

export const REQUEST_FLAGS: readonly Flag[] = [
  // threads and batches
  { names: ["--threads", "-t"], value: THREADS },
  { names: ["--threads-batch", "-tb"], value: THREADS },
  { names: ["--batch-size", "-b"], value: BATCH },
  { names: ["--ubatch-size", "-ub"], value: BATCH },
  { names: ["--parallel", "-np"], value: int(1, 256, ["-1"]) },
  { names: ["--cont-batching", "-cb"], value: none },
  { names: ["--no-cont-batching", "-nocb"], value: none },
  { names: ["--numa"], value: word("distribute", "isolate", "numactl") },
  // context and cache
  { names: ["--n-predict", "--predict", "-n"], value: int(-2, TOKENS) },
  { names: ["--keep"], value: int(-1, TOKENS) },
  { names: ["--cache-reuse"], value: int(0, TOKENS) },
  { names: ["--cache-ram", "-cram"], value: int(-1, 1 << 24) },
  { names: ["--cache-prompt"], value: none },
  { names: ["--no-cache-prompt"], value: none },
  { names: ["--context-shift"], value: none },
  { names: ["--no-context-shift"], value: none },
  { names: ["--swa-full"], value: none },
  { names: ["--ctx-checkpoints", "--swa-checkpoints", "-ctxcp"], value: int(0, 1024) },
  { names: ["--kv-unified", "-kvu"], value: none },
  { names: ["--no-kv-unified", "-no-kvu"], value: none },
  { names: ["--cache-type-k", "-ctk"], value: CACHE_TYPES },
  { names: ["--cache-type-v", "-ctv"], value: CACHE_TYPES },
  { names: ["--flash-attn", "-fa"], value: ON_OFF_AUTO },
  { names: ["--defrag-thold", "-dt"], value: decimal(-1, 1) },
  { names: ["--warmup"], value: none },
  { names: ["--no-warmup"], value: none },
  // placement on this node's devices (not across the mesh: see REFUSED's --tensor-split)
  { names: ["--gpu-layers", "--n-gpu-layers", "-ngl"], value: int(-1, 4096, ["auto", "all"]) },
  { names: ["--split-mode", "-sm"], value: word("none", "layer", "row", "tensor") },
  { names: ["--main-gpu", "-mg"], value: int(0, 255) },
  { names: ["--kv-offload", "-kvo"], value: none },
  { names: ["--no-kv-offload", "-nkvo"], value: none },
  { names: ["--cpu-moe", "-cmoe"], value: none },
  { names: ["--n-cpu-moe", "-ncmoe"], value: int(0, 4096) },
  { names: ["--fit", "-fit"], value: word("on", "off") },
  { names: ["--load-mode", "-lm"], value: word("auto", "none", "mmap", "mlock", "mmap+mlock", "dio") },
  // rope scaling
  { names: ["--rope-scaling"], value: word("none", "linear", "yarn") },
  { names: ["--rope-scale"], value: decimal(0, 1024) },
  { names: ["--rope-freq-base"], value: decimal(0, 1e12) },
  { names: ["--rope-freq-scale"], value: decimal(0, 1024) },
  { names: ["--yarn-orig-ctx"], value: int(0, TOKENS) },
  { names: ["--yarn-ext-factor"], value: decimal(-1, 1024) },
  { names: ["--yarn-attn-factor"], value: decimal(-1, 1024) },
  { names: ["--yarn-beta-slow"], value: decimal(-1, 1024) },
  { names: ["--yarn-beta-fast"], value: decimal(-1, 1024) },
  // sampling defaults
  { names: ["--temp", "--temperature"], value: decimal(0, 100) },
  { names: ["--top-k"], value: int(0, 1 << 20) },
  { names: ["--top-p"], value: decimal(0, 1) },
  { names: ["--min-p"], value: decimal(0, 1) },
  { names: ["--typical", "--typical-p"], value: decimal(0, 1) },
  { names: ["--top-nsigma", "--top-n-sigma"], value: decimal(-1, 100) },
  { names: ["--xtc-probability"], value: decimal(0, 1) },
  { names: ["--xtc-threshold"], value: decimal(0, 1) },
  { names: ["--repeat-penalty"], value: decimal(0.01, 100) },
  { names: ["--repeat-last-n"], value: int(0, TOKENS) },
  { names: ["--presence-penalty"], value: decimal(-100, 100) },
  { names: ["--frequency-penalty"], value: decimal(-100, 100) },
  { names: ["--dry-multiplier"], value: decimal(0, 100) },
  { names: ["--dry-base"], value: decimal(0, 100) },
  { names: ["--dry-allowed-length"], value: int(0, TOKENS) },
  { names: ["--dry-penalty-last-n"], value: int(0, TOKENS) },
  { names: ["--dynatemp-range"], value: decimal(0, 100) },
  { names: ["--dynatemp-exp"], value: decimal(0, 100) },
  { names: ["--mirostat"], value: int(0, 2) },
  { names: ["--mirostat-lr"], value: decimal(0, 100) },
  { names: ["--mirostat-ent"], value: decimal(0, 100) },
  // -1 is llama.cpp's "random"; it reads the seed as an unsigned 32-bit number.
  { names: ["--seed", "-s"], value: int(-1, 2 ** 32 - 1) },
  { names: ["--ignore-eos"], value: none },
  // chat templates and reasoning
  { names: ["--jinja"], value: none },
  { names: ["--no-jinja"], value: none },
  { names: ["--chat-template"], value: CHAT_TEMPLATES },
  { names: ["--reasoning-format"], value: word("none", "auto", "deepseek", "deepseek-legacy") },
  { names: ["--reasoning", "-rea"], value: ON_OFF_AUTO },
  { names: ["--reasoning-budget"], value: int(-1, TOKENS) },
  // serving
  { names: ["--pooling"], value: word("none", "mean", "cls", "last", "rank") },
  { names: ["--metrics"], value: none },
  { names: ["--no-webui", "--no-ui"], value: none },
  { names: ["--no-slots"], value: none },
];

/**
 * Why some flags a user may reach for are refused, where the generic reason would not help.
 * `--tensor-split`: a request's value would come after the mesh's and win, undoing the shares the
 * mesh gave each RPC worker from the memory it offers; `--split-mode` and `--main-gpu` stay allowed
 * for a node's own GPUs.
 */
const SPLIT_IS_THE_MESHS = "the mesh sets the tensor split of a model split over RPC workers from the memory each offers, and llama.cpp takes the last value given";
const REFUSED = new Map<string, string>([
  ["--tensor-split", SPLIT_IS_THE_MESHS],
  ["-ts", SPLIT_IS_THE_MESHS],
  ["--mlock", "the pinned llama.cpp has no such flag; use --load-mode mlock"],
  ["--no-mmap", "the pinned llama.cpp has no such flag; use --load-mode none"],
  ["--chat-template-file", "it names a file; pick a built-in template with --chat-template NAME"],
  ["--chat-template-kwargs", "it takes JSON; set it as the operator (--llamacpp-args or models.json)"],
]);

const GENERIC =
  "a load request may set only tuning flags (threads, batch sizes, slots, context, cache types, flash attention, GPU layers, rope scaling, sampling defaults, chat template names, reasoning); " +
  "other llama-server arguments are the operator's: --llamacpp-args or models.json";

/** Aliases to flags, spelled as llama.cpp compares them. */
const BY_NAME = new Map<string, Flag>(REQUEST_FLAGS.flatMap((f) => f.names.map((n) => [n, f] as const)));

const INTEGER = /^-?\d{1,10}$/;
const DECIMAL = /^-?(\d{1,12}(\.\d{0,12})?|\.\d{1,12})([eE][-+]?\d{1,3})?$/;

function describe(v: Value): string {
  switch (v.kind) {
    case "none":
      return "no value";
    case "int":
      return `an integer from ${v.min} to ${v.max}${v.words ? ` or ${v.words.join(" or ")}` : ""}`;
    case "decimal":
      return `a number from ${v.min} to ${v.max}`;
    case "word":
      return v.words.length > 12 ? `a built-in name (e.g. ${v.words.slice(0, 6).join(", ")})` : `one of ${v.words.join(", ")}`;
  }
}

function validValue(v: Value, text: string): boolean {
  switch (v.kind) {
    case "none":
      return false;
    case "int":
      return (INTEGER.test(text) && Number(text) >= v.min && Number(text) <= v.max) || (v.words?.includes(text) ?? false);
    case "decimal":
      return DECIMAL.test(text) && Number.isFinite(Number(text)) && Number(text) >= v.min && Number(text) <= v.max;
    case "word":
      return v.words.includes(text);
  }
}

export type RequestArgsResult = { ok: true; args: RequestArgs } | { ok: false; error: string };

const refuse = (error: string): RequestArgsResult => ({ ok: false, error });
/** The one place words become `RequestArgs`: after every one of them passed the allowlist. */
const checkedArgs = (words: string[]): RequestArgsResult => ({ ok: true, args: words as readonly string[] as RequestArgs });

/**
 * Checks a load request's `llamacpp_args` against the allowlist. Accepts `--flag value` and
 * `--flag=value`; returns canonical `--flag value` words (llama.cpp itself has no `=` form), or
 * the first problem, naming its flag.
 */
export function parseRequestArgs(text: string | undefined): RequestArgsResult {
  if (!text) return checkedArgs([]);
  if (text.length > MAX_REQUEST_ARGS_CHARS) return refuse(`llamacpp_args is ${text.length} characters long; at most ${MAX_REQUEST_ARGS_CHARS}`);
  let words: string[];
  try {
    words = splitArgs(text);
  } catch (err) {
    if (err instanceof ServerArgsError) return refuse(err.message);
    throw err;
  }
  if (words.length > MAX_REQUEST_ARGS_WORDS) return refuse(`llamacpp_args has ${words.length} words; at most ${MAX_REQUEST_ARGS_WORDS}`);
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (!w.startsWith("-") || w === "-" || w === "--") return refuse(`llamacpp_args: unexpected ${JSON.stringify(w)}; expected a flag such as --threads 4`);
    const eq = w.indexOf("=");
    const written = eq < 0 ? w : w.slice(0, eq);
    const name = canonicalFlag(written);
    const flag = BY_NAME.get(name);
    if (!flag) {
      const why = managedFlagReason(name) ?? REFUSED.get(name) ?? GENERIC;
      return refuse(`llamacpp_args may not contain ${written}: ${why}`);
    }
    const canonical = flag.names[0]!;
    if (flag.value.kind === "none") {
      if (eq >= 0) return refuse(`llamacpp_args: ${written} takes no value, got ${JSON.stringify(w.slice(eq + 1))}`);
      out.push(canonical);
      continue;
    }
    // Like llama.cpp, the word after a flag is its value whatever it looks like (`-1` included).
    const value = eq >= 0 ? w.slice(eq + 1) : words[++i];
    if (value === undefined) return refuse(`llamacpp_args: ${written} needs a value: ${describe(flag.value)}`);
    if (!validValue(flag.value, value)) return refuse(`llamacpp_args: ${written} expects ${describe(flag.value)}, got ${JSON.stringify(value)}`);
    out.push(canonical, value);
  }
  return checkedArgs(out);
}
