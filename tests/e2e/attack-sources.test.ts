/**
 * Attacks through model sources, on real nodes (issue 12, holes 5 and 6): a mesh member announces
 * seeds whose source URLs point at this machine (plain http and https to 127.0.0.1, https to a name
 * that resolves to loopback), and a node assigned those models must refuse every one without a
 * single connection to them; and a model whose file would arrive under a name another model of
 * the operator's already has is refused, leaving that file as it was.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { RoguePeer } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

/** A TCP port on loopback that counts every connection made to it (and hangs up on each). */
function trap() {
  let connections = 0;
  const listener = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        connections++;
        socket.end();
      },
      data() {},
    },
  });
  cleanups.push(() => listener.stop(true));
  return { port: listener.port, connections: () => connections };
}

const gaveUp = (node: MeshTestNode, model: string) => node.child.output().includes(`giving up on the assigned model; choosing another model=${model} `);

test("a member's seeds pointing at loopback are refused without a single connection to them", async () => {
  const target = trap();
  const sources: Record<string, string> = {
    "evil-http": `http://127.0.0.1:${target.port}/evil.gguf`,
    "evil-https": `https://127.0.0.1:${target.port}/evil.gguf`,
    "evil-name": `https://localhost:${target.port}/evil.gguf`,
  };
  const models = Object.keys(sources);
  // An idle node with no models: once it has a peer, it takes a model of the catalog, which holds only these.
  const victim = await startMeshNode(SMALL_LLAMA, { name: "victim" });
  nodes.push(victim);
  const rogue = await RoguePeer.start();
  cleanups.push(() => rogue.close());
  const member = await rogue.member(decodeJoinToken(victim.token));
  cleanups.push(() => member.close());
  // The next heartbeat carries them.
  member.mine.seeds = Object.entries(sources).map(([name, source]) => ({ name, source }));

  // Until every model is given up, or the first connection (the attack working) ends the wait.
  await waitFor(() => target.connections() > 0 || models.every((m) => gaveUp(victim, m)), { what: "the victim to refuse all three sources", timeoutMs: 60_000 });
  expect(target.connections()).toBe(0);
  for (const m of models) expect(gaveUp(victim, m)).toBe(true);
  expect(victim.child.output()).toContain("http is not allowed (https only)");
  expect(victim.child.output()).toContain("127.0.0.1 is not a public address");
  expect(victim.child.output()).toMatch(/localhost resolves to [^"]*127\.0\.0\.1[^"]*, not a public address/);
});

test("a download whose file would land on another model's file is refused; that file keeps its bytes", async () => {
  let requests = 0;
  const source = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => {
      requests++;
      return new Response("<html>not a model</html>");
    },
  });
  cleanups.push(() => source.stop(true));
  const dir = mkdtempSync(join(tmpdir(), "mesh-test-overwrite-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  // The operator's own models.json: "other" lives in x.gguf; "x" is known by its source only, and
  // its file would arrive as x.gguf.
  const registry = join(dir, "models.json");
  writeFileSync(registry, JSON.stringify({ other: { file: "x.gguf" }, x: { file: "elsewhere/x.gguf", source: `http://127.0.0.1:${source.port}/x.gguf` } }));
  const theirs = join(dir, "x.gguf");
  writeFileSync(theirs, "GGUF the bytes of the operator's other model");
  const node = await startMeshNode([...SMALL_LLAMA, "--model", "x"], { models: { "models.json": registry, "x.gguf": theirs }, name: "owner" });
  nodes.push(node);

  await waitFor(() => gaveUp(node, "x") || requests > 0, { what: "the node to refuse the download", timeoutMs: 60_000 });
  expect(node.child.output()).toContain("x.gguf already exists");
  expect(requests).toBe(0);
  expect(readFileSync(join(node.modelsDir, "x.gguf"), "utf8")).toBe("GGUF the bytes of the operator's other model");
});
