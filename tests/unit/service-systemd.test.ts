/**
 * systemd's own tools read back the units `mesh service install` writes: `systemd-analyze verify`
 * accepts them, and the manager in test mode starts ExecStart as the argv mesh was given.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildUnit, serviceArgs, type UnitInput } from "../../service/unit.ts";
import { AS_MESH, base, readableTempDirs, TRICKY } from "../../harness/unit-inputs.ts";

// systemd's own tools read the units back. They run where Debian's systemd package is installed,
// with no running manager needed.
const ANALYZE = "/usr/bin/systemd-analyze";
const SYSTEMD = "/lib/systemd/systemd";
const temps = readableTempDirs();
afterAll(temps.remove);
const tempDir = temps.fresh;

/** A unit whose command exists (this very bun), written as mesh.service in a fresh folder. */
function writeUnit(over: Partial<UnitInput>): { dir: string; file: string } {
  const dir = tempDir();
  const file = join(dir, "mesh.service");
  writeFileSync(file, buildUnit({ ...base, command: [process.execPath, join(import.meta.dir, "..", "..", "main.ts")], ...over }), { mode: 0o644 });
  return { dir, file };
}


describe.skipIf(!existsSync(ANALYZE))("systemd-analyze verify", () => {
  const verify = (file: string, user: boolean) => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", SYSTEMD_LOG_LEVEL: "notice" };
    // The user manager needs a runtime dir; there is none in a container, so a temporary one stands in.
    if (user) env.XDG_RUNTIME_DIR = tempDir();
    const r = Bun.spawnSync([ANALYZE, "verify", "--man=no", ...(user ? ["--user"] : []), file], { env, stdout: "pipe", stderr: "pipe" });
    // Complaints about the host's own units are not ours; every line about ours names its file.
    const ours = `${r.stdout}${r.stderr}`.split("\n").filter((l) => l.includes("mesh.service") || l.includes(file));
    return { code: r.exitCode, ours };
  };
  const cases: [name: string, over: Partial<UnitInput>][] = [
    ["system", {}],
    ["system, tricky flags and paths", { nodeArgs: TRICKY, stateDir: "/srv/my state", modelsDir: "/home/u/100% models", llamaDirEnv: "/opt/llama dir", docs: "file:///opt/my%20mesh/README.md" }],
    ["system, as mesh, with the secrets' file", { ...AS_MESH, nodeArgs: TRICKY }],
    ["system, the secrets' file in a tricky state dir", { ...AS_MESH, stateDir: "/srv/my 100% state", envFile: "/srv/my 100% state/service.env" }],
    ["user", { user: true, stateDir: "/home/u/.mesh", modelsDir: "/home/u/.models", cacheHome: "/home/u/.cache" }],
    ["user, tricky flags", { user: true, nodeArgs: TRICKY }],
    ["user, with the secrets' file", { user: true, envFile: "/home/u/.mesh/service.env" }],
  ];
  test.each(cases)("%s: exit 0, no warning about the unit", (_name, over) => {
    const { file } = writeUnit(over);
    expect(verify(file, over.user === true)).toEqual({ code: 0, ours: [] });
  });

  test("and it does complain about a broken unit (the check can fail)", () => {
    const { file } = writeUnit({});
    writeFileSync(file, buildUnit({ ...base, command: [process.execPath] }).replace("--log-format json", '"unbalanced'));
    const { code, ours } = verify(file, false);
    expect(code).not.toBe(0);
    expect(ours.join("\n")).toContain("Unbalanced quoting");
  });
});

/**
 * systemd itself in test mode (`systemd --test`) loads the unit and prints its ExecStart as argv,
 * so the quoting is checked by the parser that matters. It refuses to run as root, so as root it
 * runs as nobody. The printout quotes words like a shell (`"`, `\`, `$` escaped) and shows each `$`
 * still doubled: systemd turns `$$` into `$` (and `$X` into a variable) only when it starts the process.
 */
const setpriv = Bun.which("setpriv");
const canTestMode = existsSync(SYSTEMD) && (process.getuid?.() !== 0 || setpriv !== null);
describe.skipIf(!canTestMode)("systemd reads ExecStart back as the argv mesh was given", () => {
  function printedArgv(dir: string, user: boolean): string[] {
    const asNobody = process.getuid?.() === 0 ? [setpriv!, "--reuid=nobody", "--regid=nogroup", "--clear-groups"] : [];
    const env: Record<string, string> = { PATH: "/usr/bin:/bin", SYSTEMD_UNIT_PATH: `${dir}:`, XDG_RUNTIME_DIR: tempDir() };
    const r = Bun.spawnSync([...asNobody, SYSTEMD, "--test", user ? "--user" : "--system", "--unit=mesh.service", "--no-pager", "--log-target=null"], { env, stdout: "pipe", stderr: "pipe" });
    const dump = r.stdout.toString();
    const section = dump.slice(dump.indexOf("-> Unit mesh.service:"));
    const line = /Command Line: (.*)/.exec(section)?.[1];
    if (line === undefined) throw new Error(`no ExecStart in systemd's dump (exit ${r.exitCode}): ${r.stderr}`);
    return [...line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) => (m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : m[2]!));
  }

  test.each([false, true])("as a user unit: %p", (user) => {
    const command = [process.execPath, "/opt/my mesh/main.ts"];
    const { dir } = writeUnit({ user, command, nodeArgs: TRICKY, stateDir: "/srv/100% state" });
    const args = serviceArgs({ ...base, nodeArgs: TRICKY, stateDir: "/srv/100% state" }).flat();
    expect(printedArgv(dir, user)).toEqual([...command, ...args.map((a) => a.split("$").join("$$"))]);
  });
});
