/**
 * `mesh service install|uninstall` as a real process, with HOME in a temporary folder and the unit
 * redirected (MESH_SYSTEMD_DIR, or XDG_CONFIG_HOME for --user) so nothing on this machine changes.
 * Where systemctl should run, a stand-in on PATH records what it was asked. No node is started
 * (tests/e2e/attack-unit-secrets.test.ts starts one from a unit).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { meshCommand } from "../../harness/node.ts";

const temps: string[] = [];
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

interface Sandbox {
  home: string;
  /** Where the command runs (relative --model paths resolve here). */
  cwd: string;
  bin: string;
}

function sandbox(): Sandbox {
  const root = mkdtempSync(join(tmpdir(), "mesh-service-"));
  temps.push(root);
  const s = { home: join(root, "home"), cwd: join(root, "work"), bin: join(root, "bin") };
  for (const dir of Object.values(s)) mkdirSync(dir);
  return s;
}

/** A systemctl stand-in that logs its arguments and answers with `code` (and `message` on stderr). */
function fakeSystemctl(s: Sandbox, code: number, message = ""): string {
  const log = join(s.bin, "systemctl.log");
  writeFileSync(join(s.bin, "systemctl"), `#!/bin/sh\necho "$*" >> '${log}'\n${message ? `echo '${message}' >&2\n` : ""}exit ${code}\n`);
  chmodSync(join(s.bin, "systemctl"), 0o755);
  return log;
}

function mesh(s: Sandbox, args: string[], env: Record<string, string> = {}): { code: number; out: string } {
  // Only what is given here: no XDG_* of the machine running the tests, and PATH holds only the stand-in.
  const r = Bun.spawnSync([...meshCommand(), ...args], { cwd: s.cwd, env: { HOME: s.home, PATH: s.bin, ...env }, stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  return { code: r.exitCode ?? -1, out: `${r.stdout}${r.stderr}` };
}

describe("with MESH_SYSTEMD_DIR: the file only", () => {
  test("install --user writes the unit with the flags given; uninstall --user removes it", () => {
    const s = sandbox();
    const units = join(s.home, "units");
    const env = { MESH_SYSTEMD_DIR: units };
    const log = fakeSystemctl(s, 0);
    const file = join(units, "mesh.service");

    const install = mesh(s, ["service", "install", "--user", "--port", "9999", "--model", "my model.gguf"], env);
    expect(install).toMatchObject({ code: 0 });
    expect(install.out).toContain(`wrote ${file}`);
    expect(install.out).toContain("MESH_SYSTEMD_DIR is set, so systemctl was not run");
    expect(install.out).toContain("systemctl --user enable --now mesh.service");
    const text = readFileSync(file, "utf8");
    expect(text.startsWith("# Written by `mesh service install`.")).toBe(true);
    expect(text).toContain("\n    --port 9999 \\\n");
    expect(text).toContain(`\n    --model "${s.cwd}/my model.gguf" \\\n`);
    expect(text).toContain(`\n    --state-dir ${s.home}/.mesh \\\n    --models-dir ${s.home}/.models \\\n    --log-format json\n`);
    expect(text).toContain(`Environment=XDG_CACHE_HOME=${s.home}/.cache\n`);
    expect(text).toContain("\nWantedBy=default.target\n");
    expect(/^ExecStart=[^]*?\n[A-Z]/m.exec(text)![0]).not.toContain("--user");
    // Nothing but the file: no systemctl, no state folders.
    expect(existsSync(log)).toBe(false);
    expect(existsSync(join(s.home, ".mesh"))).toBe(false);

    const again = mesh(s, ["service", "install", "--user", "--port", "9998"], env);
    expect(again.code).toBe(0);
    expect(again.out).toContain(`replaced ${file}`);
    expect(readFileSync(file, "utf8")).toContain("--port 9998");

    const uninstall = mesh(s, ["service", "uninstall", "--user"], env);
    expect(uninstall.code).toBe(0);
    expect(uninstall.out).toContain(`removed ${file}`);
    expect(existsSync(file)).toBe(false);
    expect(mesh(s, ["service", "uninstall", "--user"], env)).toMatchObject({ code: 0, out: expect.stringContaining("nothing to remove") });
  });

  test("a unit mesh did not write is neither replaced nor removed", () => {
    const s = sandbox();
    const env = { MESH_SYSTEMD_DIR: s.home };
    const file = join(s.home, "mesh.service");
    const foreign = "[Unit]\nDescription=someone else's mesh\n\n[Service]\nExecStart=/usr/bin/mesh\n";
    writeFileSync(file, foreign);

    const install = mesh(s, ["service", "install", "--port", "9999"], env);
    expect(install.code).toBe(1);
    expect(install.out).toContain(`mesh: ${file} was not written by \`mesh service install\`; refusing to replace it`);
    const uninstall = mesh(s, ["service", "uninstall"], env);
    expect(uninstall.code).toBe(1);
    expect(uninstall.out).toContain("refusing to remove it");
    expect(readFileSync(file, "utf8")).toBe(foreign);
  });

  test("a bad flag is a usage error, and nothing is written", () => {
    const s = sandbox();
    const install = mesh(s, ["service", "install", "--port", "nope"], { MESH_SYSTEMD_DIR: s.home });
    expect(install.code).toBe(2);
    expect(install.out).toContain("--port: expected a port number");
    expect(existsSync(join(s.home, "mesh.service"))).toBe(false);
  });
});

describe("a user unit in ~/.config/systemd/user, with systemctl", () => {
  const userFile = (s: Sandbox) => join(s.home, ".config", "systemd", "user", "mesh.service");

  test("systemctl loads, enables and starts it; uninstall stops, disables and reloads", () => {
    const s = sandbox();
    const log = fakeSystemctl(s, 0);
    const install = mesh(s, ["service", "install", "--user"]);
    expect(install.code).toBe(0);
    expect(install.out).toContain("mesh.service is enabled and started; `journalctl --user -u mesh -f` follows its log");
    expect(readFileSync(userFile(s), "utf8")).toContain("\nWantedBy=default.target\n");
    // The folders the service writes exist before it starts.
    for (const dir of [".mesh", ".models", ".cache/mesh"]) expect(existsSync(join(s.home, dir))).toBe(true);

    expect(mesh(s, ["service", "install", "--user", "--port", "9998"]).out).toContain("is enabled and restarted");
    expect(mesh(s, ["service", "uninstall", "--user"]).code).toBe(0);
    expect(existsSync(userFile(s))).toBe(false);
    expect(readFileSync(log, "utf8").trim().split("\n")).toEqual([
      "--user daemon-reload",
      "--user enable --now mesh.service",
      "--user daemon-reload",
      "--user enable mesh.service",
      "--user restart mesh.service",
      "--user disable --now mesh.service",
      "--user daemon-reload",
    ]);
  });

  test("XDG_CONFIG_HOME moves it", () => {
    const s = sandbox();
    fakeSystemctl(s, 0);
    const config = join(s.home, "cfg");
    expect(mesh(s, ["service", "install", "--user"], { XDG_CONFIG_HOME: config }).code).toBe(0);
    expect(existsSync(join(config, "systemd", "user", "mesh.service"))).toBe(true);
  });

  test("where systemctl fails (no systemd), the unit is still written and the commands to run are printed", () => {
    const s = sandbox();
    fakeSystemctl(s, 1, "System has not been booted with systemd as init system (PID 1).");
    const install = mesh(s, ["service", "install", "--user"]);
    expect(install.code).toBe(0);
    expect(install.out).toContain(`wrote ${userFile(s)}`);
    expect(install.out).toContain("not started: `systemctl --user daemon-reload` failed: System has not been booted with systemd");
    expect(install.out).toContain("  systemctl --user daemon-reload\n  systemctl --user enable --now mesh.service\n");

    // A link `systemctl enable` made is removed with the unit when systemctl cannot disable it.
    const wants = join(s.home, ".config", "systemd", "user", "default.target.wants");
    mkdirSync(wants);
    symlinkSync(userFile(s), join(wants, "mesh.service"));
    const uninstall = mesh(s, ["service", "uninstall", "--user"]);
    expect(uninstall.code).toBe(0);
    expect(uninstall.out).toContain("not stopped: `systemctl --user disable --now mesh.service` failed");
    expect(existsSync(userFile(s))).toBe(false);
    expect(existsSync(join(wants, "mesh.service"))).toBe(false);
  });

  test("where there is no systemctl at all, the same", () => {
    const s = sandbox();
    const install = mesh(s, ["service", "install", "--user"]);
    expect(install.code).toBe(0);
    expect(install.out).toContain("not started: systemctl is not installed");
    expect(existsSync(userFile(s))).toBe(true);
  });
});

describe("secrets go to a 0600 environment file, not into the unit", () => {
  const userFile = (s: Sandbox) => join(s.home, ".config", "systemd", "user", "mesh.service");
  const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

  test("a user unit: the file is written 0600 and named; replaced without secrets it goes; uninstall removes it", () => {
    const s = sandbox();
    fakeSystemctl(s, 0);
    const envFile = join(s.home, ".mesh", "service.env");
    const install = mesh(s, ["service", "install", "--user", "--api-key", "sk-one", "--api-key", "sk-two"]);
    expect(install.code).toBe(0);
    expect(install.out).toContain(`wrote ${envFile} (mode 0600)`);
    expect(install.out).not.toContain("sk-one");
    const unit = readFileSync(userFile(s), "utf8");
    expect(unit).not.toContain("sk-one");
    expect(unit).toContain(`\nEnvironmentFile=${envFile}\n`);
    expect(unit).not.toContain("User=");
    expect(mode(envFile)).toBe("600");
    expect(readFileSync(envFile, "utf8")).toContain('\nMESH_API_KEY="sk-one,sk-two"\n');

    const plain = mesh(s, ["service", "install", "--user", "--port", "9998"]);
    expect(plain.code).toBe(0);
    expect(plain.out).toContain(`removed ${envFile}`);
    expect(existsSync(envFile)).toBe(false);
    expect(readFileSync(userFile(s), "utf8")).not.toContain("EnvironmentFile=");

    expect(mesh(s, ["service", "install", "--user", "--api-key=sk-three"]).code).toBe(0);
    expect(existsSync(envFile)).toBe(true);
    const uninstall = mesh(s, ["service", "uninstall", "--user"]);
    expect(uninstall.code).toBe(0);
    expect(uninstall.out).toContain(`removed ${envFile}`);
    expect(existsSync(envFile)).toBe(false);
  });

  test("a key the service could not read back (a comma) is refused, and nothing is written", () => {
    const s = sandbox();
    const install = mesh(s, ["service", "install", "--api-key", "sk-a,b"], { MESH_SYSTEMD_DIR: s.home });
    expect(install.code).toBe(1);
    expect(install.out).toContain("--api-key: the service reads its values from MESH_API_KEY, a comma-separated list");
    expect(install.out).not.toContain("sk-a,b");
    expect(existsSync(join(s.home, "mesh.service"))).toBe(false);
  });

  test("a service.env mesh did not write is not replaced", () => {
    const s = sandbox();
    const state = join(s.home, "state");
    mkdirSync(state);
    writeFileSync(join(state, "service.env"), "OTHER=1\n");
    const install = mesh(s, ["service", "install", "--user", "--api-key", "k", "--state-dir", state], { MESH_SYSTEMD_DIR: s.home });
    expect(install.code).toBe(1);
    expect(install.out).toContain(`${join(state, "service.env")} was not written by \`mesh service install\`; refusing to replace it`);
    expect(readFileSync(join(state, "service.env"), "utf8")).toBe("OTHER=1\n");
    expect(existsSync(join(s.home, "mesh.service"))).toBe(false);
  });
});

describe("the system unit runs as the mesh user", () => {
  test("with MESH_SYSTEMD_DIR: User=mesh, the system's folders by default, and what install would do as root", () => {
    const s = sandbox();
    const units = join(s.home, "units");
    const install = mesh(s, ["service", "install", "--port", "9999"], { MESH_SYSTEMD_DIR: units, PATH: "/usr/bin:/bin" });
    expect(install.code).toBe(0);
    expect(install.out).toContain("the unit runs as the user mesh; MESH_SYSTEMD_DIR is set, so no user was created and nothing chowned");
    expect(install.out).toContain("`useradd --system --user-group --home-dir /var/lib/mesh --no-create-home --shell /usr/sbin/nologin mesh` creates it");
    const unit = readFileSync(join(units, "mesh.service"), "utf8");
    expect(unit).toContain("\nUser=mesh\nGroup=mesh\n");
    expect(unit).toContain("\n    --state-dir /var/lib/mesh \\\n    --models-dir /var/lib/mesh/models \\\n");
    expect(unit).toContain("\nEnvironment=XDG_CACHE_HOME=/var/cache\n");
    expect(unit).toContain("\nReadWritePaths=/var/lib/mesh /var/lib/mesh/models /var/cache/mesh\n");
    // Only the GPU groups this machine has.
    const groups = readFileSync("/etc/group", "utf8").split("\n").map((l) => l.split(":")[0]);
    const expected = ["video", "render"].filter((g) => groups.includes(g));
    expect(/^SupplementaryGroups=(.*)$/m.exec(unit)?.[1]?.split(" ") ?? []).toEqual(expected);
  });

  test("a folder that is not the service's own to have is refused", () => {
    const s = sandbox();
    const install = mesh(s, ["service", "install", "--models-dir", "/var/lib"], { MESH_SYSTEMD_DIR: s.home });
    expect(install.code).toBe(1);
    expect(install.out).toContain("--models-dir /var/lib: the system unit gives this folder to the user mesh, and /var/lib holds other programs' data");
    expect(existsSync(join(s.home, "mesh.service"))).toBe(false);
  });
});
