/**
 * Issue 12, holes 3, 4 and 9, performed as a mesh member would: a rogue that holds the mesh secret
 * (from the join token) opens HTTP streams with the forwarding marker to the management routes of
 * a node with `--api-key`, holds more streams than its share of the node's `--max-connections`,
 * and floods the mesh with 4,096 announced models. A real node, a real llama-server, the rogue on
 * the same iroh transport as a node; loopback only.
 */
// test-runner: alone, the flood's check times requests (a 404's p50 under 20 ms), which other files' CPU would decide.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { encodeFrame, StreamKind } from "../../streams/wire.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { rogueHttp, type RogueAnswer } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const KEY = "attack-member-key";
const MODEL = "tiny-q8_0";
/** `--max-connections`: one member may hold half, 4 streams. */
const MAX_CONNECTIONS = 8;
const auth = { authorization: `Bearer ${KEY}` };

let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
/** Where the load payload's command would write; removed at the end. */
const scratch = mkdtempSync(join(tmpdir(), "mesh-attack-member-"));

interface Loaded {
  model_name: string;
  pid: number;
  state: string;
}
const loaded = async () => ((await (await fetch(`${node.url}/api/v1/health`, { headers: auth })).json()) as { all_models_loaded: Loaded[] }).all_models_loaded;
const loadsOf = (model: string) => [...node.child.output().matchAll(new RegExp(`loading model model=${model} `, "g"))].length;

beforeAll(async () => {
  const tiny = await testModel("tiny", "q8_0");
  [node, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--api-key", KEY, "--max-connections", String(MAX_CONNECTIONS), "--model", tiny]), RoguePeer.start()]);
  // Ready, not just listed: a server still starting changes under the tests' before/after checks.
  await waitFor(async () => (await loaded()).some((s) => s.model_name === MODEL && s.state === "ready"), { what: `${MODEL} to load`, timeoutMs: 120_000 });
  member = await rogue.member(decodeJoinToken(node.token));
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
  rmSync(scratch, { recursive: true, force: true });
});

const statusOf = (a: RogueAnswer) => ("status" in a ? a.status : `reset (${a.reset})`);

describe("a mesh member reaches inference and the model list only", () => {
  const marker = join(scratch, "ran");
  const mcp = `--mcp-servers-json '{"mcpServers":{"x":{"command":"sh","args":["-c","id > ${marker}"]}}}'`;
  const admin: [string, string, string | undefined][] = [
    ["POST", "/api/v1/load", JSON.stringify({ model_name: MODEL, llamacpp_args: mcp })],
    ["POST", "/api/v1/unload", JSON.stringify({ model_name: MODEL })],
    ["POST", "/api/v1/unload", undefined],
    ["GET", "/api/status", undefined],
    ["GET", "/api/v1/health", undefined],
    ["GET", "/api/v1/stats", undefined],
    ["GET", "/metrics", undefined],
    ["GET", "/health", undefined],
    ["POST", "/v1/../api/v1/unload", undefined],
    ["GET", "/v1/models/../../api/status", undefined],
    ["POST", "/v1/%2e%2e/api/v1/load", JSON.stringify({ model_name: MODEL, llamacpp_args: mcp })],
    ["GET", "//api/status", undefined],
  ];

  test.each(admin)("%s %s is refused on the serving node; nothing loads, unloads or leaks", async (method, path, body) => {
    const before = await loaded();
    const loadsBefore = loadsOf(MODEL);
    const answer = await rogueHttp(member, { method, path, ...(body === undefined ? {} : { body }) });
    expect(statusOf(answer)).toBe(403);
    if (!("status" in answer)) return;
    const error = (JSON.parse(answer.body) as { error: { message: string; type: string; code: string } }).error;
    expect(error.code).toBe("forbidden_for_mesh_members");
    expect(error.message).toContain("not open to mesh members");
    // No mesh secret and no join token cross the wire.
    expect(answer.body).not.toContain(node.token);
    expect(answer.body).not.toContain("mesh1");
    expect(await loaded()).toEqual(before);
    expect(loadsOf(MODEL)).toBe(loadsBefore);
    expect(existsSync(marker)).toBe(false);
  });

  test("the model list and a chat completion work, without the node's API key", async () => {
    const models = await rogueHttp(member, { method: "GET", path: "/v1/models" });
    expect(statusOf(models)).toBe(200);
    expect("body" in models && (JSON.parse(models.body) as { data: { id: string }[] }).data.map((m) => m.id)).toContain(MODEL);
    const one = await rogueHttp(member, { method: "GET", path: `/v1/models/${MODEL}` });
    expect(statusOf(one)).toBe(200);
    // Where the node keeps its files is its own: a member sees the file's name, not its path.
    const dirs = dirname(await testModel("tiny", "q8_0"));
    for (const answer of [models, one]) {
      const text = "body" in answer ? answer.body : "";
      expect(text).toContain(`"checkpoint":"${MODEL}.gguf"`);
      expect(text).not.toContain(dirs);
    }
    const chat = await rogueHttp(member, {
      method: "POST",
      path: "/v1/chat/completions",
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    });
    expect(statusOf(chat)).toBe(200);
    expect("body" in chat && (JSON.parse(chat.body) as { choices: unknown[] }).choices).toHaveLength(1);
  });

  test("an error a member's request meets names files, not where this node keeps them", async () => {
    const missing = join(scratch, "kept", "here", "ghost.gguf");
    writeFileSync(join(node.modelsDir, "models.json"), JSON.stringify({ ghost: { file: missing } }));
    const answer = await rogueHttp(member, { method: "POST", path: "/v1/chat/completions", body: JSON.stringify({ model: "ghost", messages: [{ role: "user", content: "hi" }], max_tokens: 1 }) });
    expect(statusOf(answer)).toBe(404);
    const body = "body" in answer ? answer.body : "";
    expect(body).toContain("file ghost.gguf does not exist");
    expect(body).not.toContain(scratch);
    // The node's own client, with its key, is told where.
    const own = await fetch(`${node.url}/v1/chat/completions`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ model: "ghost", messages: [{ role: "user", content: "hi" }], max_tokens: 1 }) });
    expect(await own.text()).toContain(missing);
  });

  test("a request head that is not a plain request is cut off", async () => {
    for (const head of [
      { method: "BREW", path: "/v1/models" },
      { method: "GET", path: "http://evil.example/v1/models" },
      { method: "GET", path: `/v1/models/${"a".repeat(5_000)}` },
      { method: "GET", path: "/v1/models", headers: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`x-h${i}`, "1"])) },
      { method: "GET", path: "/v1/models", headers: { "x-big": "a".repeat(20_000) } },
    ]) {
      const answer = await rogueHttp(member, head);
      expect("reset" in answer || answer.status === 403).toBe(true);
    }
  });
});

describe("a member holding streams open", () => {
  const head = (method: string, path: string) => encodeFrame({ method, path, headers: { "content-type": "application/json", [FORWARDED_HEADER]: "1" } });

  /** The answer to a model listing; undefined when none comes within a few seconds (a loaded machine), so the caller asks again. */
  const ask = () =>
    rogueHttp(member, { method: "GET", path: "/v1/models" }, 5_000).then(
      (a) => ("status" in a ? a : undefined),
      () => undefined,
    );

  test("beyond its share of --max-connections, its next request gets 503 with Retry-After; the places come back when its streams end", async () => {
    // Bodies begun and never finished: each holds a place until it ends (or its deadline passes).
    const stalled = [];
    for (let i = 0; i < MAX_CONNECTIONS / 2; i++) {
      const stream = await member.openStream(StreamKind.HTTP);
      await stream.send.writeAll(Buffer.concat([head("POST", "/v1/chat/completions"), new TextEncoder().encode('{"model":')]));
      stalled.push(stream);
    }
    // What each ask got, and the node's last words, in the failure: a wait that ends without a
    // 503 (once in a full CI run) must say whether the node answered 200 or not at all.
    const seen: string[] = [];
    const busy = await waitFor(
      async () => {
        const answer = await ask();
        seen.push(answer ? String(answer.status) : "none");
        return answer?.status === 503 ? answer : undefined;
      },
      { what: "a 503 once the member holds its share" },
    ).catch((err: Error) => {
      throw new Error(`${err.message}; asks got ${seen.join(" ")}; the node's log ends:\n${node.child.output().slice(-4000)}`);
    });
    expect(busy.headers["retry-after"]).toBe("1");
    expect(JSON.parse(busy.body)).toEqual({
      error: { message: `this node serves at most ${MAX_CONNECTIONS / 2} requests at once from one mesh member; retry shortly`, type: "service_unavailable", code: "too_many_requests" },
    });
    // The outside door has its own places: the node's own clients are still served.
    expect((await fetch(`${node.url}/v1/models`, { headers: auth })).status).toBe(200);
    for (const stream of stalled) await stream.send.reset(0);
    await waitFor(async () => (await ask())?.status === 200, { what: "the member's places to come back once its streams ended" });
  });
});

/** p50 of `n` timed calls, in ms. */
async function p50(n: number, call: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await call();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(n / 2)]!;
}

describe("a member announcing 4,096 models", () => {
  const unknown = () =>
    fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }),
    }).then(async (r) => {
      expect(r.status).toBe(404);
      await r.arrayBuffer();
    });
  const list = () => fetch(`${node.url}/v1/models`, { headers: auth }).then((r) => r.arrayBuffer());

  test("does not slow every request down: the catalog is worked out when announcements change", async () => {
    // Warm up, then time: a 404 for an unknown model, and the model list.
    await p50(10, unknown);
    const before = { notFound: await p50(50, unknown), list: await p50(50, list) };
    member.mine.modelsOnDisk = Array.from({ length: 4_096 }, (_, i) => ({ name: `flood-${String(i).padStart(4, "0")}`, size: 1_000_000 + i, need: 2_000_000 + i }));
    await waitFor(
      async () => ((await (await fetch(`${node.url}/v1/models`, { headers: auth })).json()) as { data: { id: string }[] }).data.some((m) => m.id === "flood-4095"),
      { what: "the node to list the flood" },
    );
    await p50(10, unknown);
    const after = { notFound: await p50(50, unknown), list: await p50(50, list) };
    console.log(
      `p50 over 50 requests, before / after 4,096 announced models: 404 ${before.notFound.toFixed(1)} / ${after.notFound.toFixed(1)} ms; ` +
        `GET /v1/models ${before.list.toFixed(1)} / ${after.list.toFixed(1)} ms`,
    );
    expect(after.notFound).toBeLessThan(20);
    // The list itself grows with the catalog (4,097 entries): bounded, not rebuilt per request.
    expect(after.list).toBeLessThan(100);
    // The rogue is still a member: its announcement was within the limits.
    expect(member.announcement).toBeDefined();
  });
});
