/**
 * Issue 27, the CLI's API key: another local user who holds the configured port (the node was down,
 * or runs elsewhere) answered `/health` and got the key with the CLI's first request. The CLI now
 * sends its key only to a node that proves it holds the key file in the CLI's own state dir, bound
 * to the address it dialed and the address the node listens on (issue 43: bound to the port alone,
 * a squatter on 127.0.0.1 relayed the challenge to the node on 127.0.0.2 and got the key). A real
 * node, the real CLI, and a squatter that records every header: one that forges the proof, one
 * that passes the challenge on to the real node (as sent, or naming the node's own address), and
 * one on the node's own port at another loopback address. Loopback only.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { LOCAL_PROOF_PATH } from "../../node/local-proof.ts";
import { killAllChildren, spawnChild } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { meshCommand, startNode, type TestNode } from "../../harness/node.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer } from "../../harness/rogue-peer.ts";

const KEY = "attack-cli-key-secret";
let node: MeshTestNode;
let rogue: RoguePeer;
let otherStateDir: string;
beforeAll(async () => {
  [node, rogue] = await Promise.all([startMeshNode(["--api-key", KEY]), RoguePeer.start()]);
  otherStateDir = mkdtempSync(join(tmpdir(), "mesh-test-other-state-"));
});
afterAll(async () => {
  await Promise.all([node?.stop(), rogue?.close()]);
  rmSync(otherStateDir, { recursive: true, force: true });
  await killAllChildren();
});

async function runMesh(args: string[]): Promise<{ code: number; out: string }> {
  const child = spawnChild("mesh", [...meshCommand(), ...args]);
  const code = await child.proc.exited;
  await child.waitForOutput(/$/);
  return { code, out: child.output() };
}

/** A server on the port the CLI is pointed at, answering as a node would, that keeps every header it is sent. */
function squatter(proof: (query: URLSearchParams) => Promise<Response>, port = 0) {
  const seen: string[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port,
    fetch: async (req) => {
      const url = new URL(req.url);
      seen.push([...req.headers].map(([k, v]) => `${k}: ${v}`).join("\n"));
      if (url.pathname === "/health") return Response.json({ status: "ok" });
      if (url.pathname === LOCAL_PROOF_PATH) return proof(url.searchParams);
      return Response.json({ data: [], nodeId: "squatter", peers: [] });
    },
  });
  return { server, sawKey: () => seen.some((h) => h.includes(KEY)), requests: () => seen.length };
}

const COMMANDS: [string, string[]][] = [
  ["status", ["status"]],
  ["models", ["models"]],
  ["pull", ["pull", "org/repo:Q4_K_M"]],
  ["rm", ["rm", "some-model"]],
];

test("its own node: mesh status with the key works", async () => {
  const own = await runMesh(["status", "--json", "--port", String(node.port), "--state-dir", node.stateDir, "--api-key", KEY]);
  expect(own.code).toBe(0);
  expect(JSON.parse(own.out)).toMatchObject({ url: node.url });
});

describe.each(COMMANDS)("mesh %s", (_, args) => {
  test("a squatter that forges the proof never sees the key", async () => {
    const fake = squatter(async () => Response.json({ proof: "0".repeat(64) }));
    try {
      const run = await runMesh([...args, "--port", String(fake.server.port), "--state-dir", node.stateDir, "--api-key", KEY]);
      expect(run.code).toBe(1);
      expect(run.out).toContain("the API key is not sent to it");
      expect(fake.requests()).toBeGreaterThan(0);
      expect(fake.sawKey()).toBe(false);
    } finally {
      fake.server.stop(true);
    }
  });

  test.each([
    ["as the CLI sent it", (q: URLSearchParams) => q.toString()],
    ["naming the node's own address instead", (q: URLSearchParams) => `challenge=${q.get("challenge")}&dialed=127.0.0.1:${node.port}`],
  ])("a squatter that passes the challenge on to the real node (%s) never sees the key", async (_, query) => {
    const relay = squatter((q) => fetch(`${node.url}${LOCAL_PROOF_PATH}?${query(q)}`));
    try {
      const run = await runMesh([...args, "--port", String(relay.server.port), "--state-dir", node.stateDir, "--api-key", KEY]);
      expect(run.code).toBe(1);
      expect(run.out).toContain("could not prove it holds the key");
      expect(relay.sawKey()).toBe(false);
    } finally {
      relay.server.stop(true);
    }
  });
});

describe("the node on 127.0.0.2, a squatter on 127.0.0.1 with the same port, the CLI at its default address", () => {
  let elsewhere: TestNode;
  let relay: ReturnType<typeof squatter>;
  beforeAll(async () => {
    elsewhere = await startNode(["--listen", "127.0.0.2", "--api-key", KEY]);
    relay = squatter((q) => fetch(`${elsewhere.url}${LOCAL_PROOF_PATH}?${q.toString()}`), elsewhere.port);
  });
  afterAll(async () => {
    relay?.server.stop(true);
    await elsewhere?.stop();
  });
  test.each(COMMANDS)("mesh %s: the relayed proof is for another address, and the key is never sent", async (_, args) => {
    const run = await runMesh([...args, "--port", String(elsewhere.port), "--state-dir", elsewhere.stateDir, "--api-key", KEY]);
    expect(run.code).toBe(1);
    expect(run.out).toContain(`listens at 127.0.0.1:${elsewhere.port}`);
    expect(relay.requests()).toBeGreaterThan(0);
    expect(relay.sawKey()).toBe(false);
  });
  test("the CLI pointed at the node's own address proves it and is answered", async () => {
    const run = await runMesh(["status", "--json", "--listen", "127.0.0.2", "--port", String(elsewhere.port), "--state-dir", elsewhere.stateDir, "--api-key", KEY]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.out)).toMatchObject({ url: `http://127.0.0.2:${elsewhere.port}` });
  });
});

test("the real node, asked from a state dir that is not its own, is not sent the key either", async () => {
  const run = await runMesh(["status", "--port", String(node.port), "--state-dir", otherStateDir, "--api-key", KEY]);
  expect(run.code).toBe(1);
  expect(run.out).toContain(`not known to be the node of the state dir ${otherStateDir}`);
});

test("the proof route: a challenge that is not 64 hex digits gets 400; the key file is not served", async () => {
  const here = `127.0.0.1:${node.port}`;
  const bad = await fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=../local-api.key&dialed=${here}`);
  expect(bad.status).toBe(400);
  // An address the node does not listen on, or none: no proof.
  for (const dialed of [`127.0.0.2:${node.port}`, `127.0.0.1:${node.port + 1}`, `[::1]:${node.port}`, "", "localhost:1"]) {
    expect([dialed, (await fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=${"ab".repeat(32)}&dialed=${dialed}`)).status]).toEqual([dialed, 400]);
  }
  const good = await fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=${"ab".repeat(32)}&dialed=${here}`);
  expect(good.status).toBe(200);
  const { proof, bound } = (await good.json()) as { proof: string; bound: string };
  expect(proof).toMatch(/^[0-9a-f]{64}$/);
  expect(bound).toBe(here);
  expect(await Bun.file(join(node.stateDir, "local-api.key")).text()).not.toContain(proof);
});

test("the proof route is the local CLI's: a mesh member forwarding to it gets 403, a rebinding Host 421", async () => {
  const member = await rogue.member(decodeJoinToken(node.token));
  try {
    const answer = await rogueHttp(member, { method: "GET", path: `${LOCAL_PROOF_PATH}?challenge=${"ab".repeat(32)}&dialed=127.0.0.1:${node.port}` });
    expect("status" in answer && answer.status).toBe(403);
  } finally {
    member.close();
  }
  const rebound = await fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=${"ab".repeat(32)}&dialed=127.0.0.1:${node.port}`, { headers: { host: "rebind.attacker.example" } });
  expect(rebound.status).toBe(421);
});
