/**
 * Issue 27, the CLI's API key: another local user who holds the configured port (the node was down,
 * or runs elsewhere) answered `/health` and got the key with the CLI's first request. The CLI now
 * sends its key only to a node that proves it holds the key file in the CLI's own state dir, bound
 * to the port it listens on. A real node, the real CLI, and a squatter that records every header:
 * one that forges the proof, and one that passes the challenge on to the real node. Loopback only.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { LOCAL_PROOF_PATH } from "../../node/local-proof.ts";
import { killAllChildren, spawnChild } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { meshCommand } from "../../harness/node.ts";
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
function squatter(proof: (challenge: string) => Promise<Response>) {
  const seen: string[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const url = new URL(req.url);
      seen.push([...req.headers].map(([k, v]) => `${k}: ${v}`).join("\n"));
      if (url.pathname === "/health") return Response.json({ status: "ok" });
      if (url.pathname === LOCAL_PROOF_PATH) return proof(url.searchParams.get("challenge") ?? "");
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

  test("a squatter that passes the challenge on to the real node never sees the key", async () => {
    const relay = squatter((challenge) => fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=${challenge}`));
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

test("the real node, asked from a state dir that is not its own, is not sent the key either", async () => {
  const run = await runMesh(["status", "--port", String(node.port), "--state-dir", otherStateDir, "--api-key", KEY]);
  expect(run.code).toBe(1);
  expect(run.out).toContain(`not known to be the node of the state dir ${otherStateDir}`);
});

test("the proof route: a challenge that is not 64 hex digits gets 400; the key file is not served", async () => {
  const bad = await fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=../local-api.key`);
  expect(bad.status).toBe(400);
  const good = await fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=${"ab".repeat(32)}`);
  expect(good.status).toBe(200);
  const { proof } = (await good.json()) as { proof: string };
  expect(proof).toMatch(/^[0-9a-f]{64}$/);
  expect(await Bun.file(join(node.stateDir, "local-api.key")).text()).not.toContain(proof);
});

test("the proof route is the local CLI's: a mesh member forwarding to it gets 403, a rebinding Host 421", async () => {
  const member = await rogue.member(decodeJoinToken(node.token));
  try {
    const answer = await rogueHttp(member, { method: "GET", path: `${LOCAL_PROOF_PATH}?challenge=${"ab".repeat(32)}` });
    expect("status" in answer && answer.status).toBe(403);
  } finally {
    member.close();
  }
  const rebound = await fetch(`${node.url}${LOCAL_PROOF_PATH}?challenge=${"ab".repeat(32)}`, { headers: { host: "rebind.attacker.example" } });
  expect(rebound.status).toBe(421);
});
