/**
 * The routes that pull and delete models (Ollama's `/api/pull` and `/api/delete`, Lemonade's
 * `/api/v1/pull` and `/api/v1/delete`) attacked the way issue 12's routes were: a rebinding `Host`,
 * a page's foreign `Origin`, no API key, an oversized body, junk JSON, and a mesh member
 * forwarding to them; each refused in the shape its clients read, before anything is fetched or
 * deleted. Then what a request names: a name with `..` or a leading `/`, a `file://` checkpoint;
 * and what a delete may touch: never another tool's store, never a file outside the models dir
 * (a models.json entry naming one), never a file put in the models dir by hand, and a link in the
 * models dir goes but not what it points to. And what a pull may take: never the name of a model
 * the node has (one in a subfolder of the models dir too).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync, copyFileSync } from "node:fs";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { tempDirs } from "../../harness/transfer.ts";

const KEY = "attack-pull-key";
const LIMIT = 4096;
const dirs = tempDirs("mesh-attack-pull-");
let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
/** Another tool's folder of models (MESH_MODEL_STORES), and files outside every store. */
let extraStore: string;
let outside: string;

beforeAll(async () => {
  const home = dirs.fresh("home");
  extraStore = dirs.fresh("extra-store");
  outside = dirs.fresh("outside");
  const tiny = await testModel("tiny", "q8_0");
  copyFileSync(tiny, join(extraStore, "theirs.gguf"));
  copyFileSync(tiny, join(outside, "elsewhere.gguf"));
  copyFileSync(tiny, join(outside, "target.gguf"));
  [node, rogue] = await Promise.all([
    startMeshNode([...SMALL_LLAMA, "--api-key", KEY, "--max-body-size", String(LIMIT)], { env: { HOME: home, MESH_SCAN_MODEL_STORES: "on", MESH_MODEL_STORES: extraStore } }),
    RoguePeer.start(),
  ]);
  member = await rogue.member(decodeJoinToken(node.token));
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
  dirs.remove();
});

const ROUTES = [
  ["POST", "/api/pull"],
  ["DELETE", "/api/delete"],
  ["POST", "/api/delete"],
  ["POST", "/api/v1/pull"],
  ["POST", "/api/v1/delete"],
] as const;
const isOllama = (path: string) => /^\/api\/(?!v1\/)/.test(path);
const json = { "content-type": "application/json" };
const key = { authorization: `Bearer ${KEY}` };
const body = JSON.stringify({ model: "hf.co/org/repo:Q4_K_M", name: "hf.co/org/repo:Q4_K_M", model_name: "org/repo:Q4_K_M", stream: false });

async function errorMessage(res: Response): Promise<string> {
  const e = ((await res.json()) as { error?: unknown }).error;
  return typeof e === "string" ? e : (e as { message: string }).message;
}

/** Nothing was staged or installed: no pull got as far as the models dir. */
const modelsDirUntouched = () => expect(readdirSync(node.modelsDir).filter((f) => f !== ".pulls" && f !== "models.json")).toEqual([]);

describe.each(ROUTES)("%s %s", (method, path) => {
  const send = (headers: Record<string, string>, payload: string = body) => fetch(`${node.url}${path}`, { method, headers: { ...json, ...key, ...headers }, body: payload });

  test("a rebinding Host gets 421", async () => {
    const res = await send({ host: "rebind.attacker.example" });
    expect(res.status).toBe(421);
    expect(await errorMessage(res)).toContain("localhost");
  });

  test("no API key gets 401, in the route's error shape", async () => {
    const res = await fetch(`${node.url}${path}`, { method, headers: json, body });
    expect(res.status).toBe(401);
    expect(typeof ((await res.json()) as { error: unknown }).error === "string").toBe(isOllama(path));
  });

  test("a mesh member forwarding to it is refused on this node", async () => {
    const answer = await rogueHttp(member, { method, path, body });
    expect("status" in answer && answer.status).toBe(403);
    modelsDirUntouched();
  });

  test("a page's foreign Origin gets 403", async () => {
    const res = await send({ origin: "https://evil.example", "content-type": "text/plain" });
    expect(res.status).toBe(403);
  });

  test("a body over --max-body-size gets 413", async () => {
    const res = await send({}, JSON.stringify({ model: "x", padding: "y".repeat(LIMIT * 2) }));
    expect(res.status).toBe(413);
    expect(typeof ((await res.json()) as { error: unknown }).error === "string").toBe(isOllama(path));
  });

  test("junk JSON gets 400 and a clear message", async () => {
    const res = await send({}, "{not json");
    expect(res.status).toBe(400);
    expect(await errorMessage(res)).toContain("not valid JSON");
  });
});

describe("what a request names", () => {
  const post = (path: string, payload: unknown, method = "POST") => fetch(`${node.url}${path}`, { method, headers: { ...json, ...key }, body: JSON.stringify(payload) });
  const cases: [what: string, method: string, path: string, payload: unknown, says: string][] = [
    ["Ollama: a file:// model", "POST", "/api/pull", { model: "file:///etc/passwd", stream: false }, "file: references are not pulled"],
    ["Ollama, streaming: a file:// model", "POST", "/api/pull", { model: "file:///etc/passwd" }, "file: references are not pulled"],
    ["Lemonade: a file:// checkpoint", "POST", "/api/v1/pull", { model_name: "passwd", checkpoint: "file:///etc/passwd" }, "file: references are not pulled"],
    ["Lemonade, streaming: a file:// checkpoint", "POST", "/api/v1/pull", { model_name: "passwd", checkpoint: "file:///etc/passwd", stream: true }, "file: references are not pulled"],
    ["Lemonade: a name that climbs out", "POST", "/api/v1/pull", { model_name: "../../etc/cron.d/x", checkpoint: "org/repo:Q4_K_M" }, "cannot be a model name"],
    ["Lemonade: an absolute name", "POST", "/api/v1/pull", { model_name: "/etc/x", checkpoint: "org/repo:Q4_K_M" }, "cannot be a model name"],
    ["Lemonade: a name with an empty segment", "POST", "/api/v1/pull", { model_name: "a//b", checkpoint: "org/repo:Q4_K_M" }, "cannot be a model name"],
    ["Ollama: a reference that is a path", "POST", "/api/pull", { model: "../../etc/passwd", stream: false }, "../../etc/passwd"],
    ["Ollama: delete a name that climbs out", "DELETE", "/api/delete", { model: "../models.json" }, "not a model name"],
    ["Lemonade: delete an absolute name", "POST", "/api/v1/delete", { model_name: "/etc/passwd" }, "not a model name"],
    ["Ollama: no model at all", "POST", "/api/pull", { stream: false }, '"model" is required'],
    ["Lemonade: no model_name", "POST", "/api/v1/pull", { checkpoint: "org/repo" }, '"model_name" is required'],
  ];
  test.each(cases)("%s: 400", async (_, method, path, payload, says) => {
    const res = await post(path, payload, method);
    expect(res.status).toBe(400);
    expect(await errorMessage(res)).toContain(says);
    modelsDirUntouched();
  });
});

describe("what a delete may touch", () => {
  const del = (name: string) => fetch(`${node.url}/api/v1/delete`, { method: "POST", headers: { ...json, ...key }, body: JSON.stringify({ model_name: name }) });

  test("another tool's store: 403, and its file stays", async () => {
    const listed = (await (await fetch(`${node.url}/v1/models`, { headers: key })).json()) as { data: { id: string; store?: string }[] };
    expect(listed.data.find((m) => m.id === "theirs")).toMatchObject({ store: "extra" });
    const res = await del("theirs");
    expect(res.status).toBe(403);
    expect(await errorMessage(res)).toContain(`mesh only deletes what it downloaded into its models dir; this file belongs to a MESH_MODEL_STORES folder at ${join(extraStore, "theirs.gguf")}`);
    const ollama = await fetch(`${node.url}/api/delete`, { method: "DELETE", headers: { ...json, ...key }, body: JSON.stringify({ model: "theirs" }) });
    expect(ollama.status).toBe(403);
    expect(existsSync(join(extraStore, "theirs.gguf"))).toBe(true);
  });

  test("a models.json entry naming a file outside the models dir: 403, and the file stays", async () => {
    writeFileSync(join(node.modelsDir, "models.json"), JSON.stringify({ elsewhere: { file: join(outside, "elsewhere.gguf"), pulled: true } }));
    const res = await del("elsewhere");
    expect(res.status).toBe(403);
    expect(await errorMessage(res)).toContain("lies outside it");
    expect(existsSync(join(outside, "elsewhere.gguf"))).toBe(true);
  });

  test("a link in the models dir: the link goes, what it points to stays", async () => {
    mkdirSync(join(node.modelsDir, "linked"), { recursive: true });
    symlinkSync(join(outside, "target.gguf"), join(node.modelsDir, "linked", "pointer.gguf"));
    // Even marked as mesh's own download, only the link is mesh's.
    writeFileSync(join(node.modelsDir, "models.json"), JSON.stringify({ pointer: { file: "linked/pointer.gguf", pulled: true } }));
    const res = await del("pointer");
    expect(res.status).toBe(200);
    expect(existsSync(join(node.modelsDir, "linked", "pointer.gguf"))).toBe(false);
    // The folder it left empty goes too; the file it pointed to does not.
    expect(existsSync(join(node.modelsDir, "linked"))).toBe(false);
    expect(existsSync(join(outside, "target.gguf"))).toBe(true);
  });

  test("a file put in the models dir by hand: 403, and it stays", async () => {
    copyFileSync(await testModel("tiny", "q8_0"), join(node.modelsDir, "by-hand.gguf"));
    const res = await del("by-hand");
    expect(res.status).toBe(403);
    expect(await errorMessage(res)).toContain("mesh only deletes models it downloaded itself");
    const ollama = await fetch(`${node.url}/api/delete`, { method: "DELETE", headers: { ...json, ...key }, body: JSON.stringify({ model: "by-hand" }) });
    expect(ollama.status).toBe(403);
    expect(existsSync(join(node.modelsDir, "by-hand.gguf"))).toBe(true);
  });

  test("an unknown model: 404 in each shape", async () => {
    const res = await del("nowhere");
    expect(res.status).toBe(404);
    expect(((await res.json()) as { status: string }).status).toBe("error");
    const ollama = await fetch(`${node.url}/api/delete`, { method: "DELETE", headers: { ...json, ...key }, body: JSON.stringify({ model: "nowhere" }) });
    expect(ollama.status).toBe(404);
    expect(((await ollama.json()) as { error: unknown }).error).toContain("nowhere");
  });
});

describe("what a pull may take", () => {
  test("the name of a model in a subfolder of the models dir: 409 before anything is fetched, and that model keeps its name and file", async () => {
    const tiny = await testModel("tiny", "q8_0");
    let fetched = 0;
    const source = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (fetched++, new Response(Bun.file(tiny))) });
    mkdirSync(join(node.modelsDir, "sub"), { recursive: true });
    copyFileSync(tiny, join(node.modelsDir, "sub", "deep.gguf"));
    try {
      const res = await fetch(`${node.url}/api/v1/pull`, { method: "POST", headers: { ...json, ...key }, body: JSON.stringify({ model_name: "deep", checkpoint: `http://127.0.0.1:${source.port}/other.gguf` }) });
      expect(res.status).toBe(409);
      expect(await errorMessage(res)).toContain(`"deep" is already the name of ${join("sub", "deep.gguf")}`);
      expect(fetched).toBe(0);
      const listed = (await (await fetch(`${node.url}/v1/models`, { headers: key })).json()) as { data: { id: string }[] };
      expect(listed.data.filter((m) => m.id === "deep")).toHaveLength(1);
      expect(existsSync(join(node.modelsDir, "sub", "deep.gguf"))).toBe(true);
      expect(existsSync(join(node.modelsDir, "other.gguf"))).toBe(false);
    } finally {
      source.stop(true);
    }
  });
});
