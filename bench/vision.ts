#!/usr/bin/env bun
/**
 * What a picture costs: time to the first token of a chat with one image, on the node that serves a
 * vision model and through a node that forwards to it, against the same chat without the image; and
 * the bytes the image puts on the mesh. A host serves the `vision` test model (its projector beside
 * it: any image becomes 36 tokens), an entry joins it (loopback, relays off). Each image is a
 * gradient PNG of a size (`--sizes`; a gradient compresses to a few KiB at any size), and one of
 * random pixels (`--noise`, "" for none: as many bytes as its pixels, more than a photo's), sent
 * as a data URL in an OpenAI chat message, streamed, one token, greedy; the first token's time is
 * the client's, to the first SSE chunk that carries the role or content. Every request's text opens
 * with a counter word, so the prompt cache never skips the image. Rows take turns, `--requests`
 * rounds, so a slow spell of the machine spreads over all.
 *
 * The entry sends the request as it came, so what crosses the mesh for an image is the request body,
 * most of it the data URL; the node counts no bytes of forwarded requests (its only byte counter,
 * mesh_tunnel_bytes_total, is for RPC tunnels), so the table gives the body's size.
 *
 *   bun bench/vision.ts [--requests 20] [--sizes 64x48,512x512,1024x1024] [--noise 1024x1024] [--short]
 *
 * `--short` is 3 requests per row. The table is printed, never judged; the exit code is 1 only when
 * the bench could not run.
 */
import { availableParallelism, cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../harness/mesh.ts";
import { testModel, testProjector } from "../harness/models.ts";
import { SMALL_LLAMA } from "../harness/node.ts";
import { gradientPng, pngDataUrl } from "../harness/png.ts";
import { PNG } from "pngjs";
import { ANSWERED_BY_HEADER } from "../mesh/mesh-headers.ts";
import { pct, printTable } from "./report.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    requests: { type: "string" },
    sizes: { type: "string", default: "64x48,512x512,1024x1024" },
    noise: { type: "string", default: "1024x1024" },
    short: { type: "boolean", default: false },
    "limit-minutes": { type: "string", default: "15" },
  },
});
const REQUESTS = Number(values.requests ?? (values.short ? "3" : "20"));
if (!Number.isInteger(REQUESTS) || REQUESTS < 1) throw new Error(`--requests must be a positive integer, got "${values.requests}"`);
const size = (flag: string, s: string) => {
  const m = /^(\d+)x(\d+)$/.exec(s.trim());
  if (!m) throw new Error(`--${flag} takes WIDTHxHEIGHT; got "${s}"`);
  return { width: Number(m[1]), height: Number(m[2]) };
};
const SIZES = values.sizes.split(",").map((s) => size("sizes", s));
const NOISE = values.noise === "" ? undefined : size("noise", values.noise);
const VISION = "vision-f32";
const DEADLINE_MS = 120_000;
const ASK = "what is in this picture?";

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
watchdog(Number(values["limit-minutes"]) * 60_000, killAllChildren);

/** What one row sends: text only, or text and a PNG. */
interface Picture {
  label: string;
  png?: Buffer;
}

interface Answer {
  ttftMs: number;
  promptTokens: number;
  bodyBytes: number;
  answeredBy: string | null;
}

/**
 * Random pixels (a fixed seed): a gradient compresses to a few KiB at any size, a photo does not;
 * noise is the PNG's worst case, the size of the raw pixels, for what a big image puts on the mesh.
 */
function noisePng(width: number, height: number): Buffer {
  const png = new PNG({ width, height, colorType: 2, inputHasAlpha: true });
  let x = 0x9e3779b9;
  for (let i = 0; i < png.data.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    png.data[i] = i % 4 === 3 ? 255 : x & 0xff;
  }
  return PNG.sync.write(png, { colorType: 2 });
}

let counter = 0;

/** The chat's body: a counter word first (no two prompts share more than the template's opening), then the question, then the image if any. */
function chatBody(picture: Picture): string {
  const text = `${++counter} ${ASK}`;
  const content = [{ type: "text", text }, ...(picture.png ? [{ type: "image_url", image_url: { url: pngDataUrl(picture.png) } }] : [])];
  return JSON.stringify({
    model: VISION,
    messages: [{ role: "user", content }],
    max_tokens: 1,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
}

/** Streams one chat: ms to the first chunk with the role or content, and the prompt's tokens from the usage chunk. */
async function ask(node: MeshTestNode, picture: Picture): Promise<Answer> {
  const body = chatBody(picture);
  const started = performance.now();
  const res = await fetch(`${node.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, signal: AbortSignal.timeout(DEADLINE_MS) });
  if (res.status !== 200) throw new Error(`${picture.label}: ${res.status} ${(await res.text()).slice(0, 300)}`);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let ttftMs: number | undefined;
  let promptTokens: number | undefined;
  let pending = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    pending += value;
    const lines = pending.split("\n");
    pending = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data) as { choices?: { delta?: { role?: string; content?: string | null } }[]; usage?: { prompt_tokens: number } };
      const delta = chunk.choices?.[0]?.delta;
      if (ttftMs === undefined && (delta?.role || delta?.content)) ttftMs = performance.now() - started;
      if (chunk.usage) promptTokens = chunk.usage.prompt_tokens;
    }
  }
  if (ttftMs === undefined || promptTokens === undefined) throw new Error(`${picture.label}: the stream ended without ${ttftMs === undefined ? "a first token" : "usage"}`);
  return { ttftMs, promptTokens, bodyBytes: Buffer.byteLength(body), answeredBy: res.headers.get(ANSWERED_BY_HEADER) };
}

interface Row {
  path: string;
  node: MeshTestNode;
  picture: Picture;
  answers: Answer[];
}

const pictures: Picture[] = [
  { label: "text only" },
  ...SIZES.map(({ width, height }) => ({ label: `${width}x${height}`, png: gradientPng(width, height) })),
  ...(NOISE ? [{ label: `${NOISE.width}x${NOISE.height} noise`, png: noisePng(NOISE.width, NOISE.height) }] : []),
];
const nodes: MeshTestNode[] = [];
const before = loadavg()[0]!;
let rows: Row[] = [];
try {
  step("start a host with the vision model and an entry that joins it");
  const vision = await testModel("vision");
  const models = { [`${VISION}.gguf`]: vision, [`mmproj-${VISION}.gguf`]: testProjector(vision) };
  const { host, entry } = await hostAndEntry(VISION, [...SMALL_LLAMA, "--model", VISION], SMALL_LLAMA, nodes, { models });
  const paths = [
    { path: "host", node: host },
    { path: "via entry", node: entry },
  ];
  rows = paths.flatMap(({ path, node }) => pictures.map((picture) => ({ path, node, picture, answers: [] })));
  step("warm up: every row once");
  for (const row of rows) await ask(row.node, row.picture);
  for (let round = 0; round < REQUESTS; round++) {
    step(`round ${round + 1}/${REQUESTS}`);
    for (const row of rows) {
      const answer = await ask(row.node, row.picture);
      if (answer.answeredBy !== host.nodeId) throw new Error(`${row.path} ${row.picture.label}: answered by ${answer.answeredBy}, not the host ${host.nodeId}`);
      row.answers.push(answer);
    }
  }
} finally {
  await Promise.allSettled(nodes.map((n) => n.stop()));
  await killAllChildren();
}

const ms = (x: number) => x.toFixed(0);
const kib = (bytes: number) => (bytes < 10 * 1024 ? `${bytes} B` : bytes < 2 ** 20 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 2 ** 20).toFixed(2)} MiB`);
const p50 = (row: Row) => pct(row.answers.map((a) => a.ttftMs), 50);
const cpu = cpus()[0]?.model.trim() ?? "unknown CPU";
console.log(`\n${availableParallelism()} cores (${cpu}); ${VISION} (random weights) and mmproj-${VISION} on the host; llama.cpp ${process.env.MESH_LLAMA_DIR}\n`);
printTable(
  ["path", "image", "PNG", "request body", "prompt tokens", "TTFT p50 ms", "TTFT p90 ms", "image's cost p50 ms"],
  rows.map((row) => {
    const text = rows.find((r) => r.path === row.path && !r.picture.png)!;
    const tokens = pct(row.answers.map((a) => a.promptTokens), 50);
    const textTokens = pct(text.answers.map((a) => a.promptTokens), 50);
    return [
      row.path,
      row.picture.label,
      row.picture.png ? kib(row.picture.png.length) : "-",
      kib(row.answers[0]!.bodyBytes),
      row.picture.png ? `${tokens} (+${tokens - textTokens})` : String(tokens),
      ms(p50(row)),
      ms(pct(row.answers.map((a) => a.ttftMs), 90)),
      row.picture.png ? ms(p50(row) - p50(text)) : "-",
    ];
  }),
);
console.log(
  `\n${REQUESTS} streamed chats per row (1 token, greedy, rows taking turns), after one warm-up each; llama-server with SMALL_LLAMA (1 thread, 1 slot, ctx 512); ` +
    `"via entry" is a node without the model that forwards over the mesh (loopback QUIC, relays off). ` +
    `TTFT is the client's time to the first SSE chunk with the role or content; the image's cost is its row's p50 less the text-only p50 on the same path. ` +
    `"request body" is the JSON the client sent, which is what the entry forwards to the host (the base64 data URL is most of it): the node counts no bytes of forwarded requests, so this is the request body, not a measured count. ` +
    `The cores are shared with the client and both nodes; load average ${before.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after.`,
);
process.exit(0);
