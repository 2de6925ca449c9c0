/**
 * A vision model's projector travels with it: a member that copies the model from a peer gets the
 * projector beside it, byte for byte, paired by name, so its own copy reads images. And where two
 * machines hold the model, one with its projector and one without, the one with it hosts, though
 * the other has more memory: a blind copy would refuse every image.
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

test("of two holders, the one whose copy has the projector hosts, though the other offers more memory", async () => {
  const model = await testModel("vision");
  const blind = await startMeshNode([...SMALL_LLAMA, "--vram", "1GiB", "--model", MODEL], { models: { [`${MODEL}.gguf`]: model }, name: "blind" });
  nodes.push(blind);
  const seeing = await startMeshNode([...SMALL_LLAMA, "--vram", "512MiB", "--join", blind.token, "--model", MODEL], {
    models: { [`${MODEL}.gguf`]: model, [PROJECTOR]: testProjector(model) },
    name: "seeing",
  });
  nodes.push(seeing);
  await waitForFullMesh([blind, seeing]);
  const hostOf = async (node: MeshTestNode) => ((await (await fetch(`${node.url}/v1/models/${MODEL}`)).json()) as { host?: string }).host;
  await waitFor(async () => (await hostOf(blind)) === seeing.nodeId && (await hostOf(seeing)) === seeing.nodeId, { what: "both nodes to elect the copy with the projector", timeoutMs: 60_000 });

  // An image through the node without the projector reaches the one with it.
  const ai = new OpenAI({ baseURL: `${blind.url}/v1`, apiKey: "unused", maxRetries: 0 });
  await waitFor(async () => {
    const answer = await ai.chat.completions
      .create({ model: MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: pngDataUrl(gradientPng(32, 32)) } }] }], max_tokens: 2 })
      .catch(() => undefined);
    return (answer?.usage?.prompt_tokens ?? 0) > imageTokens(projectorShape(presetShape("vision", "f32").nEmbd));
  }, { what: "an image through the blind node to be read by the seeing one", timeoutMs: 60_000 });
}, 180_000);
