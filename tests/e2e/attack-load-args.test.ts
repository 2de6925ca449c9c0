/**
 * Issue 12, hole 1, performed as an attacker would: `POST /api/v1/load` with `llamacpp_args` that
 * make llama-server run a command (`--mcp-servers-json`), read or write files, or fail on purpose
 * to unload every idle model. A real node, real llama-server children, loopback only. Also checks
 * that every flag and bound the allowlist accepts is one the pinned llama-server parses.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loaded } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { devLlama } from "../../harness/llama.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { REQUEST_FLAGS, type Value } from "../../pool/request-args.ts";

let n: TestNode;
/** Where the attack's command would write; removed at the end. */
const scratch = mkdtempSync(join(tmpdir(), "mesh-attack-load-args-"));

beforeAll(async () => {
  const tiny = await testModel("tiny", "q8_0");
  n = await startNode([...SMALL_LLAMA, "--max-loaded-models", "-1"], { models: { "a.gguf": tiny, "b.gguf": tiny } });
});
afterAll(async () => {
  await n?.stop();
  await killAllChildren();
  rmSync(scratch, { recursive: true, force: true });
});

interface ApiError {
  message: string;
  type: string;
  code: string;
}

function load(body: Record<string, unknown>): Promise<Response> {
  return fetch(`${n.url}/api/v1/load`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

/** A refused load, in Lemonade's shape (`status`, `message`) with OpenAI's `error` beside it saying the same. */
async function loadError(res: Response): Promise<ApiError> {
  const body = (await res.json()) as { status: string; message: string; error: ApiError };
  expect(body.status).toBe("error");
  expect(body.message).toBe(body.error.message);
  return body.error;
}

const loadsOf = (model: string) => [...n.child.output().matchAll(new RegExp(`loading model model=${model} `, "g"))].length;

describe("command execution through llamacpp_args", () => {
  test("the --mcp-servers-json payload is a 400 naming the flag, and its command never runs", async () => {
    const marker = join(scratch, `ran-${crypto.randomUUID()}`);
    const payload = `--mcp-servers-json '{"mcpServers":{"x":{"command":"sh","args":["-c","id > ${marker}"]}}}'`;
    const before = loadsOf("a");
    const res = await load({ model_name: "a", llamacpp_args: payload });
    expect(res.status).toBe(400);
    const err = await loadError(res);
    expect(err.code).toBe("invalid_llamacpp_args");
    expect(err.message).toContain("--mcp-servers-json");
    expect(err.message).toContain("--llamacpp-args or models.json");
    // A load that does start (both spelling forms of allowed flags) ends any race with a server the refused one might have started.
    const ok = await load({ model_name: "a", llamacpp_args: "--threads=1 --batch-size 64" });
    expect(ok.status, await ok.clone().text()).toBe(200);
    expect(loadsOf("a")).toBe(before + 1);
    expect(existsSync(marker)).toBe(false);
  });

  const refused: [string, string][] = [
    ["-mm /etc/passwd", "-mm"],
    ["-mmu http://127.0.0.1:1/x.gguf", "-mmu"],
    ["--slot-save-path /tmp", "--slot-save-path"],
    ["--media-path /", "--media-path"],
    ["-md /etc/passwd", "-md"],
    ["--tools all", "--tools"],
    ["--agent", "--agent"],
    ["--mcp_servers_json {}", "--mcp_servers_json"],
    ["--ssl-key-file /etc/shadow", "--ssl-key-file"],
    ["--api-prefix /x", "--api-prefix"],
    ["--chat-template-file /etc/passwd", "--chat-template-file"],
    ["--log-prompts-dir /tmp", "--log-prompts-dir"],
    ["--threads 1 --host=0.0.0.0", "--host"],
  ];
  test.each(refused)("%p is a 400 naming %p, and starts nothing", async (args, flag) => {
    const before = loadsOf("b");
    const res = await load({ model_name: "b", llamacpp_args: args });
    expect(res.status).toBe(400);
    const err = await loadError(res);
    expect(err).toMatchObject({ type: "invalid_request_error", code: "invalid_llamacpp_args" });
    expect(err.message).toContain(`may not contain ${flag}:`);
    expect(loadsOf("b")).toBe(before);
  });
});

describe("a load that fails because of its request's arguments", () => {
  test("evicts nothing: the idle model stays loaded, and the load is not retried", async () => {
    const first = await load({ model_name: "a" });
    expect(first.status, await first.clone().text()).toBe(200);
    const a = (await loaded(n)).find((s) => s.model_name === "a")!;
    expect(a.is_busy).toBe(false);
    const before = loadsOf("b");
    // Allowed flags, valid values; together llama-server cannot make a context from them.
    const res = await load({ model_name: "b", llamacpp_args: "--cache-type-v q8_0 --flash-attn off" });
    expect((await loaded(n)).map((s) => [s.model_name, s.pid])).toEqual([["a", a.pid]]);
    expect(n.child.output()).not.toContain("cause=nuclear");
    expect(loadsOf("b")).toBe(before + 1);
    expect(res.status).toBe(500);
    const err = await loadError(res);
    expect(err.code).toBe("model_load_failed");
    expect(err.message).toContain("nothing was unloaded");
  });
});

test("every flag and bound the allowlist accepts is one the pinned llama-server parses", () => {
  const samples = (v: Value): string[][] => {
    switch (v.kind) {
      case "none":
        return [[]];
      case "int":
        return [[String(v.min)], [String(v.max)], ...(v.words ?? []).map((w) => [w])];
      case "decimal":
        return [[String(v.min)], [String(v.max)]];
      case "word":
        return v.words.map((w) => [w]);
    }
  };
  const rows = REQUEST_FLAGS.flatMap((f) => samples(f.value).flatMap((value) => f.names.map((name) => [name, ...value])));
  // One llama-server per sample column keeps this to a few dozen runs: `--version` after the flags exits once they parse.
  const width = Math.max(...REQUEST_FLAGS.map((f) => samples(f.value).length * f.names.length));
  const refused: string[] = [];
  for (let i = 0; i < width; i++) {
    const argv = REQUEST_FLAGS.flatMap((f) => {
      const own = rows.filter((r) => f.names.includes(r[0]!));
      return own[i % own.length]!;
    });
    const run = Bun.spawnSync([devLlama().llamaServer, ...argv, "--version"], { stdout: "ignore", stderr: "pipe" });
    if (run.exitCode !== 0) refused.push(run.stderr.toString().match(/error while handling argument "[^"]+": [^\n]*|invalid argument: \S+/)?.[0] ?? `exit ${run.exitCode}`);
  }
  expect(refused).toEqual([]);
});
