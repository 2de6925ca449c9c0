/**
 * Issue 12, hole 8, as an attacker on the same machine sees it: `mesh service install --api-key K
 * --join TOKEN` wrote both into the unit's ExecStart, a 0644 file every local user reads, and so
 * into the node's argv, which `ps` shows everyone. Now the unit holds neither (nor the mesh secret
 * inside the token); they sit in a 0600 environment file the unit names. The node is then started
 * the way systemd would start it (the unit's ExecStart, its Environment= and that file's variables,
 * read by systemd's rules), and must run with the key in effect, joined to the mesh, with no
 * secret on any command line of its process group.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { blockedFor } from "../../service/system-user.ts";
import { killAllChildren, spawnChild, type Child } from "../../harness/children.ts";
import { devLlamaDir } from "../../harness/llama.ts";
import { peerIds, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { meshCommand, TRANSPORT_ARGS } from "../../harness/node.ts";
import { descendantsOf } from "../../harness/processes.ts";
import { directives, execStartArgv, parseEnvFile, unitEnvironment } from "../../harness/systemd-unit.ts";
import { waitFor } from "../../harness/wait.ts";

const KEY = "sk-secret-123";
const temps: string[] = [];
const founders: MeshTestNode[] = [];
const children: Child[] = [];
afterEach(async () => {
  await Promise.all([...children.splice(0).map((c) => c.stop()), ...founders.splice(0).map((n) => n.stop())]);
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true });
});
afterAll(killAllChildren);

/** The command lines of the node and of every process it started. */
const treeCommandLines = (pid: number): string[] => [readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" "), ...descendantsOf(pid).map((p) => p.cmdline)];

test("install --api-key --join: the 0644 unit holds no secret, the 0600 env file does; the node runs with them and none is in its argv", async () => {
  const founder = await startMeshNode([]);
  founders.push(founder);
  const token = founder.token;
  const secret = Buffer.from(decodeJoinToken(token).secret);
  const secretForms = [secret.toString("base64url"), secret.toString("base64"), secret.toString("hex")];

  const root = mkdtempSync(join(tmpdir(), "mesh-attack-unit-"));
  temps.push(root);
  const [home, units, state, models] = [join(root, "home"), join(root, "units"), join(root, "state"), join(root, "models")] as const;
  for (const d of [home, models]) mkdirSync(d);
  const nodeFlags = ["--port", "0", "--quic-bind", "127.0.0.1:0", "--relay", "disabled", "--state-dir", state, "--models-dir", models, "--log-format", "text", "--rpc-threads", "1", ...TRANSPORT_ARGS];
  // A system unit (the one in /etc/systemd/system), files only: MESH_SYSTEMD_DIR.
  const install = Bun.spawnSync([...meshCommand(), "service", "install", "--api-key", KEY, "--join", token, ...nodeFlags], {
    cwd: root,
    env: { HOME: home, PATH: "/usr/bin:/bin", MESH_SYSTEMD_DIR: units, MESH_LLAMA_DIR: devLlamaDir() },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 60_000,
  });
  const said = `${install.stdout}${install.stderr}`;
  expect({ code: install.exitCode, said }).toMatchObject({ code: 0 });
  expect(said).not.toContain(KEY);
  expect(said).not.toContain(token);

  // What every local user can read: the unit.
  const unitFile = join(units, "mesh.service");
  expect((statSync(unitFile).mode & 0o777).toString(8)).toBe("644");
  const unit = readFileSync(unitFile, "utf8");
  for (const leaked of [KEY, token, ...secretForms]) expect(unit).not.toContain(leaked);
  expect(directives(unit, "User")).toEqual(["mesh"]);

  // What only the service's user reads: the environment file it names.
  const [envFile] = directives(unit, "EnvironmentFile");
  expect(envFile).toBe(join(state, "service.env"));
  expect((statSync(envFile!).mode & 0o777).toString(8)).toBe("600");
  expect((statSync(state).mode & 0o777).toString(8)).toBe("700");
  const secrets = parseEnvFile(readFileSync(envFile!, "utf8"));
  expect(secrets).toEqual({ MESH_API_KEY: KEY, MESH_JOIN: token });

  // The node as systemd starts it. (As the user running the tests, not as mesh: that needs root and a manager.)
  const argv = execStartArgv(unit);
  expect(argv.join(" ")).not.toContain(KEY);
  const node = spawnChild("service-node", argv, { env: { ...unitEnvironment(unit), ...secrets }, cwd: "/" });
  children.push(node);
  const url = (await node.waitForOutput(/listening on (http:\/\/[^\s]+:\d+)/, 60_000))[1]!;

  // The key is in effect: 401 without it or with another, 200 with it.
  expect((await fetch(`${url}/v1/models`)).status).toBe(401);
  expect((await fetch(`${url}/v1/models`, { headers: { authorization: "Bearer sk-wrong" } })).status).toBe(401);
  expect((await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
  // And so is the token: the founder sees the node that joined with it.
  await waitFor(async () => (await peerIds(founder)).length === 1, { what: "the service node to join the founder's mesh", timeoutMs: 60_000 });

  // `ps`: no secret on the command line of the node or of anything it started; the key reached it
  // through its environment, which only its own user (and root) can read.
  const lines = treeCommandLines(node.proc.pid);
  expect(lines.some((l) => l.includes("main.ts") || l.includes("mesh"))).toBe(true);
  for (const line of lines) for (const leaked of [KEY, token, ...secretForms]) expect(line).not.toContain(leaked);
  expect(readFileSync(`/proc/${node.proc.pid}/environ`, "utf8").split("\0")).toContain(`MESH_API_KEY=${KEY}`);
});

/**
 * The same, live, as root: install creates the mesh user, gives it its folders and the 0600 file,
 * and the node runs as that user. All of it happens in private mount namespaces over copies of
 * /etc and /var/cache, so the machine's users and folders stay as they were.
 */
const modeOrUndefined = (p: string) => {
  try {
    return statSync(p).mode;
  } catch {
    return undefined;
  }
};
const canNamespace = process.getuid?.() === 0 && Bun.spawnSync(["unshare", "--mount", "--propagation", "private", "true"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
// The mesh user must be able to run this mesh (a bun under /root could not).
const reachable = meshCommand().every((p, i) => blockedFor({ path: p, access: i === 0 ? "x" : "r" }, modeOrUndefined) === undefined);
test.skipIf(!canNamespace || !reachable)("as root, live: the mesh user is created and given its folders; the node runs as mesh with the key", async () => {
  const root = mkdtempSync(join(tmpdir(), "mesh-attack-unit-live-"));
  temps.push(root);
  chmodSync(root, 0o755);
  const [etc, cache, bin, home, state, models, llama] = ["etc", "cache", "bin", "home", "state", "models", "llama"].map((d) => join(root, d)) as [string, string, string, string, string, string, string];
  for (const d of [etc, cache, bin, home]) mkdirSync(d);
  cpSync("/etc", etc, { recursive: true, verbatimSymlinks: true });
  cpSync(devLlamaDir(), llama, { recursive: true });
  writeFileSync(join(bin, "systemctl"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
  /** Runs `script` as root in a private mount namespace where the copies stand in for /etc and /var/cache. */
  const inNamespace = (script: string) => ["unshare", "--mount", "--propagation", "private", "sh", "-c", `mount --bind '${etc}' /etc && mount --bind '${cache}' /var/cache && ${script}`];

  const installArgs = ["service", "install", "--api-key", KEY, "--port", "0", "--quic-bind", "127.0.0.1:0", "--relay", "disabled", "--rpc-threads", "1", "--log-format", "text", "--state-dir", state, "--models-dir", models, "--llama-dir", llama];
  const install = Bun.spawnSync(inNamespace(`exec "$@"`).concat(["sh", ...meshCommand(), ...installArgs]), {
    cwd: root,
    env: { HOME: home, PATH: `${bin}:/usr/sbin:/usr/bin:/sbin:/bin` },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 120_000,
  });
  const said = `${install.stdout}${install.stderr}`;
  expect({ code: install.exitCode, said }).toMatchObject({ code: 0 });
  expect(said).toContain("created the system user mesh");
  expect(said).not.toContain(KEY);

  const account = readFileSync(join(etc, "passwd"), "utf8").split("\n").map((l) => l.split(":")).find((f) => f[0] === "mesh");
  expect(account?.[5]).toBe(state);
  expect(account?.[6]).toMatch(/nologin|false/);
  const [uid, gid] = [Number(account![2]), Number(account![3])];
  expect(uid).not.toBe(0);
  const owner = (p: string) => [statSync(p).uid, statSync(p).gid, (statSync(p).mode & 0o777).toString(8)];
  expect(owner(state)).toEqual([uid, gid, "700"]);
  expect(owner(join(state, "service.env"))).toEqual([uid, gid, "600"]);
  expect(owner(models).slice(0, 2)).toEqual([uid, gid]);
  expect(owner(join(cache, "mesh")).slice(0, 2)).toEqual([uid, gid]);

  const unit = readFileSync(join(etc, "systemd", "system", "mesh.service"), "utf8");
  expect(unit).not.toContain(KEY);
  expect(directives(unit, "User")).toEqual(["mesh"]);
  expect(directives(unit, "Environment")).toContain("XDG_CACHE_HOME=/var/cache");
  const secrets = parseEnvFile(readFileSync(join(state, "service.env"), "utf8"));

  // As systemd would start it: that user, the unit's ExecStart and environment, the file's variables.
  const argv = execStartArgv(unit);
  const node = spawnChild("service-node-as-mesh", inNamespace(`exec setpriv --reuid=${uid} --regid=${gid} --clear-groups "$@"`).concat(["sh", ...argv]), {
    env: { ...unitEnvironment(unit), ...secrets, HOME: state, USER: "mesh" },
    cwd: "/",
  });
  children.push(node);
  const url = (await node.waitForOutput(/listening on (http:\/\/[^\s]+:\d+)/, 60_000))[1]!;
  expect((await fetch(`${url}/v1/models`)).status).toBe(401);
  expect((await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
  const uids = /^Uid:\s+(\d+)\s+(\d+)/m.exec(readFileSync(`/proc/${node.proc.pid}/status`, "utf8"));
  expect([Number(uids?.[1]), Number(uids?.[2])]).toEqual([uid, uid]);
  for (const line of treeCommandLines(node.proc.pid)) expect(line).not.toContain(KEY);
});
