/**
 * The Python clients users point at a node (tests/python/clients.py: the `openai` SDK on `/v1` and
 * on Lemonade's `/api/v1`, the `anthropic` SDK, LangChain's ChatOpenAI, and tool calls in each),
 * run against a node that hosts the chat, embedding and tools models and a node that forwards to it. The battery runs once per
 * node before the tests; each of its checks is a test of its own, so a failure names its check and
 * carries the failing request and answer. Without MESH_PYTHON (npm test provides it) the file
 * skips and says why, and so does a check whose SDK that python cannot import.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { listChecks, pythonUnavailable, runBattery, type BatteryRun } from "../../harness/python.ts";

const MODEL = "tiny-q8_0";
const EMBED = "embed";
/** The `tools` test model, which calls a tool whenever it is offered one: the tool checks ask it. */
const TOOLS = "tools-f32";
const skip = pythonUnavailable();
if (skip) console.log(`SKIP Python clients: ${skip}`);
const python = process.env.MESH_PYTHON ?? "";
const checks = skip ? [] : listChecks(python);
for (const sdk of new Set(checks.filter((c) => c.unavailable).map((c) => c.unavailable))) console.log(`SKIP ${sdk}`);

// The test model's vocabulary puts a space before a word that follows a special token, so the
// grammar llama.cpp's Jinja path builds for a JSON schema cannot take the prompt's own tokens
// (responses.parse fails with "Failed to initialize samplers"); the legacy template path hands the
// schema's grammar to the sampler as it is. The host serves the model that way.
const HOST_LLAMA = SMALL_LLAMA.map((arg, i) => (SMALL_LLAMA[i - 1] === "--llamacpp-args" ? `${arg} --no-jinja` : arg));
// The tools model needs the Jinja path (llama-server's tool calls take it): its models.json entry
// turns it back on (the model's args come after the node's). It loads beside the chat model.
const TOOLS_ENTRY = { [TOOLS]: { file: `${TOOLS}.gguf`, llamacpp_args: "--jinja" } };

const nodes: MeshTestNode[] = [];
const runs = new Map<string, BatteryRun>();
const through = ["the serving node", "a node that forwards"] as const;

beforeAll(async () => {
  if (skip) return;
  const registry = join(mkdtempSync(join(tmpdir(), "mesh-python-clients-")), "models.json");
  writeFileSync(registry, JSON.stringify(TOOLS_ENTRY));
  const models = { [`${EMBED}.gguf`]: await testModel("embed"), [`${TOOLS}.gguf`]: await testModel("tools"), "models.json": registry };
  const hostArgs = [...HOST_LLAMA, "--max-loaded-models", "2", "--model", await testModel("tiny", "q8_0")];
  const { host, entry } = await hostAndEntry(MODEL, hostArgs, SMALL_LLAMA, nodes, { models });
  // One at a time: both end at the host's one llama-server slot, and the checks are short.
  for (const [label, node] of [[through[0], host], [through[1], entry]] as const) {
    runs.set(label, await runBattery(python, { baseUrl: node.url, model: MODEL, embedModel: EMBED, toolsModel: TOOLS }, 90_000));
  }
}, 200_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

if (skip) test.skip(`Python clients: ${skip}`, () => undefined);

describe.each(through)("through %s", (label) => {
  for (const { check, unavailable } of checks) {
    test.skipIf(unavailable !== null)(check, () => {
      const run = runs.get(label);
      expect(run, "the battery did not run (the nodes did not start)").toBeDefined();
      const result = run!.results.get(check);
      expect(result, `the battery printed no line for ${check}; its output:\n${run!.output}`).toBeDefined();
      // The detail, not just false: it names the request that failed and what came back.
      expect(result!.ok ? "ok" : JSON.stringify(result!.detail)).toBe("ok");
    });
  }
});
