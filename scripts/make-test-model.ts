#!/usr/bin/env bun
/**
 * Makes random-weight GGUF models of llama architecture for tests, deterministic by seed, with a
 * working SentencePiece tokenizer and a ChatML chat template. The `vision` preset also gets a vision
 * projector beside it, `mmproj-<model>.gguf` (`projectorPath(out)`), the name our model store pairs by.
 *
 *   bun scripts/make-test-model.ts --preset tiny --type q8_0 --out tiny.gguf [--seed 1]
 *   bun scripts/make-test-model.ts --all --dir DIR      # every preset at every weight type
 *   bun scripts/make-test-model.ts --preset tiny --split 3 --out tiny.gguf   # tiny-00001-of-00003.gguf, ...
 */
import { mkdirSync, renameSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { writeGguf, type MetadataValue, type TensorSpec } from "../models/gguf-writer.ts";
import { llamaMetadata, llamaTensors, testModelName } from "./test-model/llama-model.ts";
import { projectorMetadata, projectorShape, projectorTensors } from "./test-model/projector.ts";
import { PRESET_NAMES, presetShape, WEIGHT_TYPES, type PresetName, type WeightType } from "./test-model/presets.ts";
import { shardPath, splitModel } from "./test-model/split.ts";

export const DEFAULT_SEED = 1;

export interface TestModelRequest {
  preset: PresetName;
  type: WeightType;
  seed?: number;
  out: string;
  /** Cut into this many shards, written as `splitShardPaths(out, split)` instead of `out`. */
  split?: number;
}

/** The files `makeTestModel({ out, split })` writes, first shard first. */
export const splitShardPaths = (out: string, split: number): string[] => Array.from({ length: split }, (_, i) => shardPath(out, i, split));

/** The vision projector written beside the model `out` (a `.gguf` path; for a split model, the unsplit name). */
export const projectorPath = (out: string): string => join(dirname(out), `mmproj-${basename(out).replace(/\.gguf$/i, "")}.gguf`);

/** Presets whose model comes with a vision projector. */
export const hasProjector = (preset: PresetName): boolean => preset === "vision";

/**
 * Writes the model (through a temporary name, so a reader never sees half a file) and, for the
 * `vision` preset, its projector first, so a model on disk means its projector is there too.
 * Returns the size of everything written (all shards, and the projector).
 */
export async function makeTestModel(req: TestModelRequest): Promise<number> {
  const seed = req.seed ?? DEFAULT_SEED;
  const shape = presetShape(req.preset, req.type);
  const name = `mesh-test-${testModelName(req.preset, req.type)}`;
  const metadata = llamaMetadata(name, shape, req.type, seed);
  const tensors = llamaTensors(shape, req.type, seed);
  let size = 0;
  if (hasProjector(req.preset)) {
    const proj = projectorShape(shape.nEmbd);
    size += await writeWhole(projectorPath(req.out), projectorMetadata(`${name}-mmproj`, proj, seed), projectorTensors(proj, seed));
  }
  if (req.split === undefined) return size + (await writeWhole(req.out, metadata, tensors));
  const shards = splitModel(metadata, tensors, req.split);
  for (const [i, shard] of shards.entries()) size += await writeWhole(shardPath(req.out, i, shards.length), shard.metadata, shard.tensors);
  return size;
}

async function writeWhole(out: string, metadata: ReadonlyMap<string, MetadataValue>, tensors: readonly TensorSpec[]): Promise<number> {
  const partial = `${out}.partial-${process.pid}`;
  const size = await writeGguf(partial, metadata, tensors);
  renameSync(partial, out);
  return size;
}

function fail(message: string): never {
  console.error(`make-test-model: ${message}`);
  process.exit(2);
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      preset: { type: "string", default: "tiny" },
      type: { type: "string", default: "f32" },
      seed: { type: "string", default: String(DEFAULT_SEED) },
      out: { type: "string" },
      all: { type: "boolean", default: false },
      dir: { type: "string", default: "." },
      split: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(`usage: make-test-model.ts [--preset ${PRESET_NAMES.join("|")}] [--type ${WEIGHT_TYPES.join("|")}] [--seed N] [--split SHARDS] --out FILE
       make-test-model.ts --all [--dir DIR] [--seed N]`);
    process.exit(0);
  }
  const seed = Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) fail(`--seed must be a non-negative integer, got "${values.seed}"`);
  const split = values.split === undefined ? undefined : Number(values.split);
  if (split !== undefined && (!Number.isInteger(split) || split < 2)) fail(`--split must be an integer of 2 or more, got "${values.split}"`);
  if (split !== undefined && values.all) fail("--split makes one model; it does not go with --all");
  const jobs: TestModelRequest[] = [];
  if (values.all) {
    mkdirSync(values.dir, { recursive: true });
    for (const preset of PRESET_NAMES)
      for (const type of WEIGHT_TYPES) jobs.push({ preset, type, seed, out: join(values.dir, `${testModelName(preset, type)}.gguf`) });
  } else {
    const preset = PRESET_NAMES.find((p) => p === values.preset) ?? fail(`unknown --preset "${values.preset}"; one of ${PRESET_NAMES.join(", ")}`);
    const type = WEIGHT_TYPES.find((t) => t === values.type) ?? fail(`unknown --type "${values.type}"; one of ${WEIGHT_TYPES.join(", ")}`);
    jobs.push({ preset, type, seed, split, out: values.out ?? `${testModelName(preset, type)}.gguf` });
  }
  for (const job of jobs) {
    const size = await makeTestModel(job);
    const files = job.split === undefined ? [job.out] : splitShardPaths(job.out, job.split);
    if (hasProjector(job.preset)) files.push(projectorPath(job.out));
    console.log(`${files.join(" ")}\t${(size / 1048576).toFixed(1)} MiB`);
  }
}
