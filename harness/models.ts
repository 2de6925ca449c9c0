/**
 * Test models on demand: made once by our own GGUF writer into a cache keyed by a hash of the
 * writer's source (so a change to the writer never leaves a test reading a stale model), then
 * reused by every test file and run. The `vision` model has its projector beside it
 * (`testProjector(model)`), written before the model, so a cached model always has it.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_SEED, makeTestModel, projectorPath } from "../scripts/make-test-model.ts";
import { testModelName } from "../scripts/test-model/llama-model.ts";
import type { PresetName, WeightType } from "../scripts/test-model/presets.ts";

const REPO = join(import.meta.dir, "..");

function writerFingerprint(): string {
  const files = [
    "scripts/make-test-model.ts",
    "models/gguf-writer.ts",
    "models/ggml-quant.ts",
    ...readdirSync(join(REPO, "scripts/test-model")).map((f) => `scripts/test-model/${f}`),
  ].sort();
  const text = files.map((f) => readFileSync(join(REPO, f), "utf8")).join("\0");
  return Bun.hash(text).toString(16);
}

let dir: string | undefined;

/** Another `seed` gives other weights over the same vocabulary (a draft that agrees with nothing). */
export async function testModel(preset: PresetName, type: WeightType = "f32", seed = DEFAULT_SEED): Promise<string> {
  dir ??= join(process.env.MESH_TEST_MODELS_DIR ?? join(tmpdir(), "mesh-test-models"), writerFingerprint());
  const path = join(dir, `${testModelName(preset, type)}${seed === DEFAULT_SEED ? "" : `-seed${seed}`}.gguf`);
  if (!existsSync(path)) {
    mkdirSync(dir, { recursive: true });
    await makeTestModel({ preset, type, seed, out: path });
  }
  return path;
}

/** The vision projector (`mmproj-<model>.gguf`) beside a test model made by `testModel("vision")`. */
export const testProjector = (model: string): string => projectorPath(model);
