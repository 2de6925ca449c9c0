/**
 * Issue 12, hole 2: a web page the user visits attacks the keyless loopback API, as a browser
 * would send it: a rebinding DNS name in `Host`, a foreign `Origin` on a `text/plain` POST (no
 * preflight needed), a preflight from a foreign page. And the mesh secret over HTTP: /api/status
 * must carry neither the join token nor the secret in any encoding.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadedNames } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";

/** The one origin this node lets in (`--cors-origin`); every other page is foreign. */
const APP = "http://localhost:5173";
const EVIL = "https://evil.example";
const REBIND = "rebind.attacker.example";

let n: MeshTestNode;

beforeAll(async () => {
  n = await startMeshNode([...SMALL_LLAMA, "--cors-origin", APP], { models: { "tiny.gguf": await testModel("tiny", "q8_0") } });
});
afterAll(async () => {
  await n?.stop();
  await killAllChildren();
});

const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

describe("DNS rebinding: a Host that is not this node", () => {
  test.each(["/api/status", "/v1/models", "/api/v1/health"])("GET %s with Host: rebind.attacker.example is refused with 421", async (path) => {
    for (const host of [REBIND, `${REBIND}:${n.port}`]) {
      const res = await fetch(`${n.url}${path}`, { headers: { host } });
      expect(res.status).toBe(421);
      expect(await errorCode(res)).toBe("misdirected_request");
    }
  });

  test("the names of this node still work", async () => {
    for (const host of [`127.0.0.1:${n.port}`, `localhost:${n.port}`, `[::1]:${n.port}`, "127.0.0.1"]) {
      expect((await fetch(`${n.url}/v1/models`, { headers: { host } })).status).toBe(200);
    }
  });
});

describe("a foreign page changes nothing", () => {
  test("text/plain POST /api/v1/load from a foreign Origin: 403, and nothing is loaded", async () => {
    const res = await fetch(`${n.url}/api/v1/load`, {
      method: "POST",
      headers: { origin: EVIL, "content-type": "text/plain;charset=UTF-8" },
      body: JSON.stringify({ model_name: "tiny" }),
    });
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe("origin_not_allowed");
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    expect(await loadedNames(n)).toEqual([]);
  });

  test("text/plain POST to an inference route from a foreign Origin, or from Origin: null: 403", async () => {
    for (const origin of [EVIL, "null"]) {
      const res = await fetch(`${n.url}/v1/chat/completions`, {
        method: "POST",
        headers: { origin, "content-type": "text/plain" },
        body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 1 }),
      });
      expect(res.status).toBe(403);
    }
    expect(await loadedNames(n)).toEqual([]);
  });

  test("without an Origin (curl, SDKs) a management POST must say application/json: 415 otherwise", async () => {
    const res = await fetch(`${n.url}/api/v1/unload`, { method: "POST", headers: { "content-type": "text/plain" }, body: "" });
    expect(res.status).toBe(415);
    expect(await errorCode(res)).toBe("unsupported_media_type");
    const ok = await fetch(`${n.url}/api/v1/unload`, { method: "POST", headers: { "content-type": "application/json" } });
    expect(ok.status).toBe(200);
  });

  test("a foreign preflight gets no allow headers", async () => {
    const res = await fetch(`${n.url}/api/v1/load`, {
      method: "OPTIONS",
      headers: { origin: EVIL, "access-control-request-method": "POST", "access-control-request-headers": "content-type" },
    });
    expect(res.status).toBe(403);
    for (const h of ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers"]) expect(res.headers.get(h)).toBeNull();
  });

  test("a foreign page's GET is answered without CORS headers, so it cannot read it", async () => {
    const res = await fetch(`${n.url}/v1/models`, { headers: { origin: EVIL } });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("--cors-origin lets one origin in", () => {
  test("its preflight is answered with what it may send", async () => {
    const res = await fetch(`${n.url}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin: APP, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type, x-stainless-os" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    const allowed = res.headers.get("access-control-allow-headers")!.split(/,\s*/);
    expect(allowed).toEqual(expect.arrayContaining(["authorization", "content-type", "x-stainless-os"]));
    expect(res.headers.get("vary")).toContain("Origin");
  });

  test("its POSTs work and carry Access-Control-Allow-Origin and Vary: Origin", async () => {
    const res = await fetch(`${n.url}/api/v1/unload`, { method: "POST", headers: { origin: APP, "content-type": "application/json" }, body: "{}" });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP);
    expect(res.headers.get("vary")).toContain("Origin");
    const models = await fetch(`${n.url}/v1/models`, { headers: { origin: APP } });
    expect(models.headers.get("access-control-allow-origin")).toBe(APP);
  });

  test("the node's own origin may POST too", async () => {
    const res = await fetch(`${n.url}/api/v1/unload`, { method: "POST", headers: { origin: `http://127.0.0.1:${n.port}`, "content-type": "application/json" } });
    expect(res.status).toBe(200);
  });
});

test("/api/status carries no join token and no mesh secret, in any encoding", async () => {
  const text = await (await fetch(`${n.url}/api/status`)).text();
  const status = JSON.parse(text) as Record<string, unknown>;
  expect(status.nodeId).toBe(n.nodeId);
  expect(status).not.toHaveProperty("token");
  const secret = Buffer.from(readFileSync(join(n.stateDir, "mesh.secret"), "utf8").trim(), "hex");
  expect(secret.length).toBe(32);
  const forms = [n.token, n.token.slice(5, 40), secret.toString("hex"), secret.toString("base64"), secret.toString("base64url"), JSON.stringify([...secret]).slice(1, -1)];
  for (const form of forms) expect(text.toLowerCase()).not.toContain(form.toLowerCase());
});
