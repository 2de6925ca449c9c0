/** The `mesh` command line and node lifecycle, run as a real process. */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { spawnChild, killAllChildren } from "../../harness/children.ts";
import { startMeshNode } from "../../harness/mesh.ts";
import { meshCommand, startNode } from "../../harness/node.ts";

afterAll(killAllChildren);

async function runMesh(args: string[]): Promise<{ code: number; out: string }> {
  const child = spawnChild("mesh", [...meshCommand(), ...args]);
  const code = await child.proc.exited;
  await child.waitForOutput(/$/);
  return { code, out: child.output() };
}

describe("bad command lines exit 2 with a clear message", () => {
  const cases: [string[], string][] = [
    [["--port", "abc"], '--port: expected a port number 0-65535, got "abc"'],
    [["--bogus"], "Unknown option '--bogus'"],
    [["--max-loaded-models", "zero"], "--max-loaded-models: expected a whole number"],
    [["--relay", "sometimes"], "--relay: expected one of default, disabled or a relay's http(s) URL"],
    [["launch"], 'unknown command "launch"'],
  ];
  test.each(cases)("%p", async (args, message) => {
    const { code, out } = await runMesh(args);
    expect(code).toBe(2);
    expect(out).toContain(`mesh: ${message}`);
    expect(out).toContain("mesh --help");
  });
});

test("--help lists commands and flags and exits 0", async () => {
  const { code, out } = await runMesh(["--help"]);
  expect(code).toBe(0);
  expect(out).toContain("--max-loaded-models <n>");
  expect(out).toContain("mesh status [--json]");
});

test("--version names mesh, the llama.cpp build and the iroh binding", async () => {
  const { code, out } = await runMesh(["--version"]);
  expect(code).toBe(0);
  expect(out).toMatch(/^mesh \d+\.\d+\.\d+\nllama\.cpp \S+ .*RPC protocol \d+\.\d+\.\d+\)\niroh 1\.\d+\.\d+ \([^)]*the default line\); iroh 0\.35\.0 /);
});

describe("a node", () => {
  test("answers /health, shapes unknown routes as OpenAI errors, and exits 0 on SIGTERM", async () => {
    const node = await startNode();
    const res = await fetch(`${node.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
    const missing = await fetch(`${node.url}/v2/nothing`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toContain("/v2/nothing");
    expect(await node.stop()).toBe(0);
    await expect(fetch(`${node.url}/health`)).rejects.toThrow();
  });

  test("exits 0 on SIGINT", async () => {
    const node = await startNode();
    node.child.proc.kill("SIGINT");
    expect(await node.child.proc.exited).toBe(0);
    await node.stop();
  });

  test("mesh status reaches it; a port that is taken is refused with exit 1", async () => {
    const node = await startNode();
    const status = await runMesh(["status", "--json", "--port", String(node.port)]);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.out)).toMatchObject({ url: node.url, version: expect.any(String), peers: [] });

    const second = await runMesh(["--port", String(node.port), "--state-dir", node.stateDir]);
    expect(second.code).toBe(1);
    expect(second.out).toContain("port is in use");
    await node.stop();

    const none = await runMesh(["status", "--port", String(node.port)]);
    expect(none.code).toBe(1);
    expect(none.out).toContain(`no node answering at ${node.url}`);
  });

  test("the join token stays in the state dir: mesh token and mesh status read it there; the log only says where it is", async () => {
    const node = await startMeshNode();
    const other = mkdtempSync(join(tmpdir(), "mesh-test-state-"));
    try {
      const file = join(node.stateDir, "join-token");
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(decodeJoinToken(node.token).addr.nodeId).toBe(node.nodeId);
      expect(node.child.output()).not.toContain(node.token);
      expect(node.child.output()).toContain(`join token in ${file}; \`mesh token\` prints it`);

      const token = await runMesh(["token", "--state-dir", node.stateDir]);
      expect(token).toEqual({ code: 0, out: `${node.token}\n` });
      const status = await runMesh(["status", "--port", String(node.port), "--state-dir", node.stateDir]);
      expect(status.code).toBe(0);
      expect(status.out).toContain(`token    ${node.token}`);
      const json = await runMesh(["status", "--json", "--port", String(node.port), "--state-dir", node.stateDir]);
      expect(JSON.parse(json.out)).toMatchObject({ nodeId: node.nodeId, token: node.token });

      // A state dir that is not this node's shows no token; `mesh token` says what to do.
      const elsewhere = await runMesh(["status", "--port", String(node.port), "--state-dir", other]);
      expect(elsewhere.out).toContain("token    - (`mesh token`");
      expect(elsewhere.out).not.toContain(node.token);
      const none = await runMesh(["token", "--state-dir", other]);
      expect(none.code).toBe(1);
      expect(none.out).toContain(`mesh: no join token in ${other}: start the node first`);
    } finally {
      rmSync(other, { recursive: true, force: true });
      await node.stop();
    }
  });

  test("settings from a flag, MESH_* and config.toml: mesh status --json shows each with its source", async () => {
    const node = await startNode(["--max-loaded-models", "2"], {
      env: { MESH_MAX_LOADED_MODELS: "5", MESH_IDLE_UNLOAD: "7m" },
      stateFiles: { "config.toml": 'idle-unload = "9m"\nctx-size = 256\napi-key = ["from-file"]\n' },
    });
    const status = await runMesh(["status", "--json", "--port", String(node.port), "--state-dir", node.stateDir, "--api-key", "from-file"]);
    expect(status.code).toBe(0);
    const { settings } = JSON.parse(status.out) as { settings: { values: Record<string, unknown>; sources: Record<string, string> } };
    expect(settings.values).toMatchObject({ maxLoadedModels: 2, idleUnloadMs: 7 * 60_000, ctxSize: 256, port: 0, apiKeys: ["(hidden)"] });
    expect(settings.sources).toMatchObject({ "max-loaded-models": "flag", "idle-unload": "env", "ctx-size": "file", port: "flag", vram: "default" });
    expect(status.out).not.toContain("from-file");
    await node.stop();
  });

  test("--log-format json: every line the node writes parses as one JSON object", async () => {
    const node = await startNode(["--log-format", "json"]);
    await node.child.waitForOutput(/mesh endpoint up/);
    expect(await node.stop()).toBe(0);
    const lines = node.child.output().trim().split("\n");
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ time: expect.any(String), level: expect.any(String), msg: expect.any(String) });
  });

  test("a broken config.toml stops the node with a message naming it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mesh-test-state-"));
    writeFileSync(join(dir, "config.toml"), "port = \n");
    const bad = await runMesh(["--port", "0", "--state-dir", dir]);
    rmSync(dir, { recursive: true, force: true });
    expect(bad.code).toBe(2);
    expect(bad.out).toContain("config.toml is not valid TOML");
  });
});
