/**
 * `mesh service install|uninstall [--user]`: writes the systemd unit that runs this mesh with the
 * flags given (or removes it), then has systemctl load and start it (or stop it). Writing the file
 * is the part that must work: where systemctl is missing or reaches no manager (a container), the
 * command says what it wrote and which systemctl commands to run, and still succeeds. Only a unit
 * that mesh wrote is ever replaced or removed.
 *
 * For tests and packaging, MESH_SYSTEMD_DIR puts the unit in that directory instead, and then
 * nothing else is touched: no systemctl, no directories created.
 */
import { accessSync, constants, existsSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Command } from "../config/parse-cli.ts";
import { llamaCacheRoot } from "../llama/binaries.ts";
import { buildUnit, isMeshUnit, UNIT_NAME, unitDir } from "../service/unit.ts";
import { CommandError } from "./common.ts";

type ServiceCommand = Extract<Command, { kind: "service" }>;

/** argv that runs this mesh: the compiled binary itself, or bun with main.ts. */
function meshCommand(): string[] {
  return Bun.main.startsWith("/$bunfs/") ? [process.execPath] : [process.execPath, Bun.main];
}

/** The README as a file URI, where one sits beside main.ts (from source) or the binary. */
function readmeUri(command: string[]): string | undefined {
  const readme = join(dirname(command.at(-1)!), "README.md");
  return existsSync(readme) ? pathToFileURL(readme).href : undefined;
}

interface Target {
  file: string;
  user: boolean;
  /** False under MESH_SYSTEMD_DIR: the file only. */
  live: boolean;
}

function target(cmd: ServiceCommand): Target {
  return { file: join(unitDir(cmd.user, process.env, homedir()), UNIT_NAME), user: cmd.user, live: !process.env.MESH_SYSTEMD_DIR };
}

const systemctlLine = (t: Target, args: string) => `systemctl ${t.user ? "--user " : ""}${args}`;

/** Runs systemctl; the reason it failed, or undefined when it worked. */
function systemctl(t: Target, ...args: string[]): string | undefined {
  const exe = Bun.which("systemctl");
  if (!exe) return "systemctl is not installed";
  const r = Bun.spawnSync([exe, ...(t.user ? ["--user"] : []), ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: 90_000 });
  if (r.exitCode === 0) return undefined;
  const why = r.stderr.toString().trim() || r.stdout.toString().trim() || `exit ${r.exitCode ?? "timeout"}`;
  return `\`${systemctlLine(t, args.join(" "))}\` failed: ${why.split("\n").join("; ")}`;
}

function fileError(t: Target, verb: string, err: unknown): CommandError {
  const code = (err as { code?: string }).code;
  const message = (err as Error).message;
  if (code !== "EACCES" && code !== "EPERM") return new CommandError(`cannot ${verb} ${t.file}: ${message}`);
  const hint = t.user || !t.live ? "" : "; a system unit needs root: run it with sudo, or add --user for a unit of your own";
  return new CommandError(`cannot ${verb} ${t.file}: permission denied${hint}`);
}

/** Fails early, before systemctl or anything else, when the unit's folder cannot be written. */
function checkWritable(t: Target, verb: string): void {
  let dir = dirname(t.file);
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  try {
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw fileError(t, verb, err);
  }
}

/** The unit file there now: absent, mesh's, or someone else's (which is refused). */
function existing(t: Target, verb: string): "none" | "mesh" {
  if (!existsSync(t.file)) return "none";
  let text: string;
  try {
    text = readFileSync(t.file, "utf8");
  } catch (err) {
    throw fileError(t, "read", err);
  }
  if (!isMeshUnit(text)) {
    throw new CommandError(`${t.file} was not written by \`mesh service install\`; refusing to ${verb} it (move it away first if mesh should manage it)`);
  }
  return "mesh";
}

function printManual(t: Target, why: string, steps: string[]): void {
  console.log(`${why}\nto finish where systemd runs, run:`);
  for (const s of steps) console.log(`  ${systemctlLine(t, s)}`);
}

const NOT_RUN = "MESH_SYSTEMD_DIR is set, so systemctl was not run";

/** A service starts with ProtectSystem=strict: the folders it writes must exist before it does. */
function createServiceDirs(dirs: string[]): void {
  for (const dir of dirs) {
    try {
      mkdirSync(dir, { recursive: true });
    } catch (err) {
      throw new CommandError(`cannot create ${dir}, which the service writes to: ${(err as Error).message}`);
    }
  }
}

/** What `systemctl disable` removes, for when it could not run: our unit's links in *.wants. */
function removeWantsLinks(t: Target): void {
  const wants = join(dirname(t.file), `${t.user ? "default" : "multi-user"}.target.wants`, UNIT_NAME);
  try {
    if (readlinkSync(wants) === t.file) rmSync(wants);
  } catch {
    // no such link
  }
}

export function installService(cmd: ServiceCommand): void {
  const t = target(cmd);
  const command = meshCommand();
  const cacheHome = dirname(dirname(llamaCacheRoot()));
  const llamaDirEnv = cmd.config.llamaDir === undefined ? process.env.MESH_LLAMA_DIR || undefined : undefined;
  const unitInput = { command, nodeArgs: cmd.nodeArgs, user: cmd.user, cwd: process.cwd(), stateDir: cmd.config.stateDir, modelsDir: cmd.config.modelsDir, cacheHome, llamaDirEnv, docs: readmeUri(command) };
  let text: string;
  try {
    text = buildUnit(unitInput);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  const before = existing(t, "replace");
  checkWritable(t, "write");
  if (t.live) createServiceDirs([cmd.config.stateDir, cmd.config.modelsDir, join(cacheHome, "mesh")]);
  const tmp = `${t.file}.${process.pid}.tmp`;
  try {
    mkdirSync(dirname(t.file), { recursive: true });
    writeFileSync(tmp, text, { mode: 0o644 });
    renameSync(tmp, t.file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw fileError(t, "write", err);
  }
  console.log(`${before === "mesh" ? "replaced" : "wrote"} ${t.file}`);

  const start = before === "mesh" ? [`enable ${UNIT_NAME}`, `restart ${UNIT_NAME}`] : [`enable --now ${UNIT_NAME}`];
  if (!t.live) return printManual(t, `not started: ${NOT_RUN}`, ["daemon-reload", ...start]);
  const failed = [["daemon-reload"], ...start.map((s) => s.split(" "))].reduce<string | undefined>((f, args) => f ?? systemctl(t, ...args), undefined);
  if (failed) return printManual(t, `not started: ${failed}`, ["daemon-reload", ...start]);
  const journal = `journalctl ${t.user ? "--user " : ""}-u mesh -f`;
  console.log(`${UNIT_NAME} is enabled and ${before === "mesh" ? "restarted" : "started"}; \`${journal}\` follows its log, \`${systemctlLine(t, "status mesh")}\` shows how it is`);
  if (t.user && !existsSync(`/var/lib/systemd/linger/${userInfo().username}`)) {
    console.log("a user unit runs while you are logged in; `loginctl enable-linger` keeps it running after you log out and starts it at boot");
  }
}

export function uninstallService(cmd: ServiceCommand): void {
  const t = target(cmd);
  if (existing(t, "remove") === "none") return void console.log(`no ${UNIT_NAME} at ${t.file}; nothing to remove`);
  checkWritable(t, "remove");
  const stopFailed = t.live ? systemctl(t, "disable", "--now", UNIT_NAME) : NOT_RUN;
  try {
    rmSync(t.file);
  } catch (err) {
    throw fileError(t, "remove", err);
  }
  if (stopFailed) removeWantsLinks(t);
  else console.log(`stopped and disabled ${UNIT_NAME}`);
  console.log(`removed ${t.file}`);
  const reloadFailed = t.live ? systemctl(t, "daemon-reload") : undefined;
  if (stopFailed) printManual(t, `not stopped: ${stopFailed}`, [`stop ${UNIT_NAME}`, "daemon-reload"]);
  else if (reloadFailed) printManual(t, `not reloaded: ${reloadFailed}`, ["daemon-reload"]);
}
