/**
 * The console's routes attacked: the page (`/`, `/console/*`), its state (`/api/console/state`)
 * and its event stream (`/api/console/events`) on a node with `--api-key`. A rebinding Host is
 * refused on every one; a foreign page cannot read them; without the key the API answers 401 and
 * the page is only its static shell; neither the shell, nor the state, nor the events ever carry
 * the join token, the mesh secret or the API key; a mesh member cannot read the console's API.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { rogueHttp, type RogueAnswer } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { withDeadline } from "../../harness/wait.ts";

const KEY = "attack-console-key-51c7";
const auth = { authorization: `Bearer ${KEY}` };
const EVIL = "https://evil.example";
const REBIND = "evil.example";
const PAGE = ["/", "/console/app.js", "/console/app.css"];
const API = ["/api/console/state", "/api/console/events"];

let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
/** The secrets in every form they might leak in. */
let secrets: string[];

beforeAll(async () => {
  [node, rogue] = await Promise.all([startMeshNode(["--api-key", KEY], { name: "keyed" }), RoguePeer.start()]);
  member = await rogue.member(decodeJoinToken(node.token));
  const secret = Buffer.from(readFileSync(join(node.stateDir, "mesh.secret"), "utf8").trim(), "hex");
  expect(secret.length).toBe(32);
  secrets = [KEY, node.token, node.token.slice(5, 40), secret.toString("hex"), secret.toString("base64"), secret.toString("base64url")];
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

const expectNoSecrets = (text: string) => {
  for (const s of secrets) expect(text.toLowerCase()).not.toContain(s.toLowerCase());
};

/** The events of the stream, as text, up to the first `hello` and the first `traffic` after it (or a deadline). */
async function readEvents(headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const abort = new AbortController();
  const res = await fetch(`${node.url}/api/console/events`, { headers, signal: abort.signal });
  if (res.status !== 200) return { status: res.status, text: await res.text() };
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const enough = () => /event: ?hello[\s\S]*\n\n[\s\S]*event: ?traffic[\s\S]*\n\n/.test(text);
  try {
    await withDeadline(
      (async () => {
        while (!enough()) {
          const { done, value } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
        }
      })(),
      20_000,
      "a hello and a traffic event",
    );
  } finally {
    abort.abort();
  }
  return { status: res.status, text };
}

describe("DNS rebinding: a Host that is not this node", () => {
  test.each([...PAGE, ...API])("GET %s with Host: evil.example is refused with 421, key or no key", async (path) => {
    for (const host of [REBIND, `${REBIND}:${node.port}`]) {
      for (const headers of [{ host }, { host, ...auth }]) {
        const res = await fetch(`${node.url}${path}`, { headers });
        expect(res.status).toBe(421);
        const body = await res.text();
        expectNoSecrets(body);
        expect(body).not.toContain(node.nodeId);
      }
    }
  });
});

describe("without the key", () => {
  test.each(API)("GET %s answers 401, with no key or a wrong one", async (path) => {
    for (const headers of [{}, { authorization: "Bearer wrong" }, { "x-api-key": "wrong" }] as Record<string, string>[]) {
      const res = await fetch(`${node.url}${path}`, { headers });
      expect(res.status).toBe(401);
      const body = await res.text();
      expect(body).not.toContain(node.nodeId);
      expectNoSecrets(body);
    }
  });

  test.each(API)("GET %s takes no key in the URL (it would land in histories and logs)", async (path) => {
    for (const param of ["key", "api_key", "apiKey", "token", "access_token"]) {
      const res = await fetch(`${node.url}${path}?${param}=${KEY}`);
      expect(res.status).toBe(401);
      await res.arrayBuffer();
    }
  });

  test("the page is its static shell only: no state, no token, no key in the HTML, the script or the stylesheet", async () => {
    const texts: string[] = [];
    for (const path of PAGE) {
      const res = await fetch(`${node.url}${path}`);
      expect(res.status).toBe(200);
      texts.push(await res.text());
    }
    expect(texts[0]).toContain("<html");
    // The real bundle, not an empty answer: the page's own test ids are in it.
    expect(texts[1]).toContain("key-form");
    const all = texts.join("\n");
    expectNoSecrets(all);
    // Nothing of this node's state is baked into the page: it reads it with the key.
    expect(all).not.toContain(node.nodeId);
    expect(all).not.toContain(node.nodeId.slice(0, 10));
  });
});

test("no other page may frame the console (its buttons load and unload), nor run scripts in it", async () => {
  const res = await fetch(`${node.url}/`);
  const csp = res.headers.get("content-security-policy") ?? "";
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).toMatch(/default-src 'self'/);
  expect(csp).not.toContain("unsafe-eval");
  expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  await res.arrayBuffer();
});

describe("with the key", () => {
  test("the state names this node and carries no token, secret or key", async () => {
    const res = await fetch(`${node.url}/api/console/state`, { headers: auth });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect((JSON.parse(text) as { self: string }).self).toBe(node.nodeId);
    expectNoSecrets(text);
  });

  test("the events (hello, state, traffic, logs) carry no token, secret or key", async () => {
    const { status, text } = await readEvents(auth);
    expect(status).toBe(200);
    expect(text).toMatch(/event: ?hello/);
    expect(text).toContain(node.nodeId);
    expectNoSecrets(text);
  });
});

describe("a foreign page cannot read the console's API", () => {
  test.each(API)("GET %s with Origin: evil.example is refused or answered without CORS headers", async (path) => {
    const abort = new AbortController();
    try {
      const res = await fetch(`${node.url}${path}`, { headers: { origin: EVIL, ...auth }, signal: abort.signal });
      // A browser lets the page read a cross-origin answer only with Access-Control-Allow-Origin.
      expect(res.status === 403 || res.headers.get("access-control-allow-origin") === null).toBe(true);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    } finally {
      abort.abort();
    }
  });

  test.each(API)("a foreign preflight for %s gets no allow headers", async (path) => {
    const res = await fetch(`${node.url}${path}`, {
      method: "OPTIONS",
      headers: { origin: EVIL, "access-control-request-method": "GET", "access-control-request-headers": "authorization" },
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    for (const h of ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers"]) expect(res.headers.get(h)).toBeNull();
  });
});

describe("a mesh member", () => {
  const statusOf = (a: RogueAnswer) => ("status" in a ? a.status : `reset (${a.reset})`);

  test.each(API)("forwarding GET %s over the mesh is refused, and learns nothing", async (path) => {
    const answer = await rogueHttp(member, { method: "GET", path }, 15_000);
    expect(statusOf(answer)).toBe(403);
    if (!("status" in answer)) return;
    const error = (JSON.parse(answer.body) as { error: { code: string } }).error;
    expect(error.code).toBe("forbidden_for_mesh_members");
    expect(answer.body).not.toContain(node.nodeId);
    expectNoSecrets(answer.body);
  });

  test("forwarding GET / over the mesh gets no console", async () => {
    const answer = await rogueHttp(member, { method: "GET", path: "/" }, 15_000);
    expect(statusOf(answer)).toBe(403);
  });
});
