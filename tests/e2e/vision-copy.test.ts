/**
 * A vision model's projector travels with it: a member that copies the model from a peer gets the
 * projector beside it, byte for byte, paired by name, so its own copy reads images; the two nodes
 * know the model by one content identity, projector included.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel, testProjector } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { gradientPng, pngDataUrl } from "../../harness/png.ts";
import { sha256 } from "../../harness/transfer.ts";
import { waitFor } from "../../harness/wait.ts";
import { imageTokens, projectorShape } from "../../scripts/test-model/projector.ts";
import { presetShape } from "../../scripts/test-model/presets.ts";

const MODEL = "vision-f32";
const PROJECTOR = `mmproj-${MODEL}.gguf`;
const nodes: MeshTestNode[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

interface Listed {
  id: string;
  capabilities: string[];
  checkpoint?: string;
}
const listed = async (node: MeshTestNode, id: string) => ((await (await fetch(`${node.url}/v1/models`)).json()) as { data: Listed[] }).data.find((m) => m.id === id);

test("a member copying a vision model gets its projector; its copy reads images", async () => {
  const model = await testModel("vision");
  const projector = testProjector(model);
  const seeder = await startMeshNode([...SMALL_LLAMA, "--model", MODEL], { models: { [`${MODEL}.gguf`]: model, [PROJECTOR]: projector } });
  nodes.push(seeder);
  // The joiner wants the model and has no file of it: it copies it from the seeder.
  const joiner = await startMeshNode([...SMALL_LLAMA, "--join", seeder.token, "--model", MODEL, "--replicas", "off"]);
  nodes.push(joiner);
  await waitForFullMesh([seeder, joiner]);
  const same = (file: string, source: string) => existsSync(file) && sha256(readFileSync(file)) === sha256(readFileSync(source));
  await waitFor(() => same(join(joiner.modelsDir, `${MODEL}.gguf`), model) && same(join(joiner.modelsDir, PROJECTOR), projector), {
    what: "the joiner to have the model and its projector whole",
    timeoutMs: 90_000,
  });

  // Its own copy, paired with the projector by name: a vision model on its disk.
  await waitFor(async () => (await listed(joiner, MODEL))?.checkpoint?.startsWith(joiner.modelsDir) === true, { what: "the joiner to list its own copy" });
  expect((await listed(joiner, MODEL))?.capabilities).toEqual(["completion", "vision"]);

  // Whichever node serves it now, the image reaches a model with its projector.
  const ai = new OpenAI({ baseURL: `${joiner.url}/v1`, apiKey: "unused", maxRetries: 0 });
  const answer = await ai.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: pngDataUrl(gradientPng(32, 32)) } }] }],
    max_tokens: 2,
  });
  expect(answer.usage!.prompt_tokens).toBeGreaterThan(imageTokens(projectorShape(presetShape("vision", "f32").nEmbd)));
}, 180_000);
