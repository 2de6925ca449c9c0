/**
 * Which path a model copy between real nodes takes: the direct TLS path when the node that has
 * the file offers it, the mesh's QUIC connection when it does not (`--rpc-direct off`, or a node
 * from before model copies went direct). Either way the file arrives whole and the copy serves.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { sha256 } from "../../harness/transfer.ts";
import { waitFor } from "../../harness/wait.ts";

const MODEL = "tiny-q8_0";
const nodes: MeshTestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

async function copyFromSeeder(seederArgs: string[]): Promise<{ seeder: MeshTestNode; joiner: MeshTestNode }> {
  const tiny = await testModel("tiny", "q8_0");
  const seeder = await startMeshNode([...SMALL_LLAMA, "--model", MODEL, ...seederArgs], { models: { [`${MODEL}.gguf`]: tiny } });
  nodes.push(seeder);
  // The joiner wants the same model and lacks the file: it copies it from the seeder.
  const joiner = await startMeshNode([...SMALL_LLAMA, "--join", seeder.token, "--model", MODEL, "--replicas", "off"]);
  nodes.push(joiner);
  await waitForFullMesh([seeder, joiner]);
  await waitFor(
    () => {
      try {
        return sha256(readFileSync(join(joiner.modelsDir, `${MODEL}.gguf`))) === sha256(readFileSync(tiny));
      } catch {
        return false;
      }
    },
    { what: "the joiner to have the whole file", timeoutMs: 90_000 },
  );
  return { seeder, joiner };
}

const saidPath = (n: MeshTestNode) => n.child.output().match(/model copies from this peer go over the (direct path \(TLS\)|mesh connection)/)?.[1];

test("a member's model copy goes over the direct path when the node with the file offers it", async () => {
  const { seeder, joiner } = await copyFromSeeder([]);
  expect(joiner.child.output()).toMatch(new RegExp(`fetching model model=${MODEL} from="?node ${seeder.nodeId.slice(0, 10)}`));
  expect(saidPath(joiner)).toBe("direct path (TLS)");
  expect(joiner.child.output()).not.toContain("model copies over the direct path failed");
}, 180_000);

test("without the direct path on the node with the file, the copy goes over the mesh connection", async () => {
  const { joiner } = await copyFromSeeder(["--rpc-direct", "off"]);
  expect(saidPath(joiner)).toBe("mesh connection");
}, 180_000);
