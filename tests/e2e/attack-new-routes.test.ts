/**
 * The routes issue 13 added (Lemonade's `/live` and `/api/v1/system-info`, the OpenAI routes under
 * `/api/v1`, Ollama's `/api/*`, llama-server's `/tokenize`), and Lemonade's other base URLs issue 28
 * added (`/api/v0`, `/v0`), attacked the way issue 12's were: a
 * rebinding `Host`, a page's foreign `Origin`, no API key, an oversized body, junk JSON, and a mesh
 * member forwarding to them. Each is refused in the shape its clients read (Ollama's string error
 * on its routes), before any handler or model runs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";

const KEY = "attack-new-routes-key";
const LIMIT = 4096;
let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;

beforeAll(async () => {
  [node, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--api-key", KEY, "--max-body-size", String(LIMIT)]), RoguePeer.start()]);
  member = await rogue.member(decodeJoinToken(node.token));
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

const GETS = ["/live", "/api/v1/system-info", "/api/version", "/api/tags", "/api/ps", "/api/v1/models", "/v0/system-info", "/api/v0/models"];
const POSTS = ["/api/chat", "/api/generate", "/api/show", "/api/embed", "/api/copy", "/api/v1/chat/completions", "/tokenize", "/apply-template", "/v0/chat/completions", "/api/v0/unload"];
const OPEN = new Set(["/live"]);
const isOllama = (path: string) => /^\/api\/(?!v[01]\/)/.test(path);
const json = { "content-type": "application/json" };
const key = { authorization: `Bearer ${KEY}` };
const body = JSON.stringify({ model: "nowhere", messages: [], prompt: "x", input: "x", source: "a", destination: "b", content: "x" });

/** The error's message, whichever shape: Ollama's string, OpenAI's object, Lemonade's beside it. */
async function errorMessage(res: Response): Promise<string> {
  const e = ((await res.json()) as { error?: unknown }).error;
  return typeof e === "string" ? e : (e as { message: string }).message;
}

describe.each([...GETS.map((p) => ["GET", p] as const), ...POSTS.map((p) => ["POST", p] as const)])("%s %s", (method, path) => {
  const send = (headers: Record<string, string>, payload: string | undefined = method === "POST" ? body : undefined) =>
    fetch(`${node.url}${path}`, { method, headers: { ...json, ...key, ...headers }, ...(payload === undefined ? {} : { body: payload }) });

  test("a rebinding Host gets 421", async () => {
    const res = await send({ host: "rebind.attacker.example" });
    expect(res.status).toBe(421);
    expect(await errorMessage(res)).toContain("localhost");
  });

  test("no API key gets 401, in the route's error shape", async () => {
    if (OPEN.has(path)) return void expect((await fetch(`${node.url}${path}`)).status).toBe(200);
    const res = await fetch(`${node.url}${path}`, { method, headers: json, ...(method === "POST" ? { body } : {}) });
    expect(res.status).toBe(401);
    const e = ((await res.json()) as { error: unknown }).error;
    expect(typeof e === "string").toBe(isOllama(path));
  });

  test(path === "/api/ps" ? "a mesh member is told what this node has loaded" : "a mesh member forwarding to it is refused on this node", async () => {
    const answer = await rogueHttp(member, { method, path, ...(method === "POST" ? { body } : {}) });
    if (path === "/tokenize" || path === "/apply-template") {
      // Inference routes are members' to use: the unknown model is what refuses it.
      expect("status" in answer && answer.status).toBe(404);
      return;
    }
    if (path === "/api/ps") {
      // The models loaded here, which a forwarding node shows its clients (attack-member-ps has the rest).
      expect("status" in answer && answer.status).toBe(200);
      return;
    }
    expect("status" in answer && answer.status).toBe(403);
  });

  if (method !== "POST") return;

  test("a page's foreign Origin gets 403", async () => {
    const res = await send({ origin: "https://evil.example", "content-type": "text/plain" });
    expect(res.status).toBe(403);
  });

  test("a body over --max-body-size gets 413", async () => {
    const res = await send({}, JSON.stringify({ model: "x", prompt: "y".repeat(LIMIT * 2) }));
    expect(res.status).toBe(413);
    expect(typeof ((await res.json()) as { error: unknown }).error === "string").toBe(isOllama(path));
  });

  test("junk JSON gets 400 and a clear message", async () => {
    const res = await send({}, "{not json");
    expect(res.status).toBe(400);
    expect((await errorMessage(res)).length).toBeGreaterThan(10);
  });
});
