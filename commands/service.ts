/**
 * `mesh service install|uninstall [--user]`: writes the systemd unit that runs this mesh with the
 * flags given (or removes it), then has systemctl load and start it (or stop it). Writing the file
 * is the part that must work: where systemctl is missing or reaches no manager (a container), the
 * command says what it wrote and which systemctl commands to run, and still succeeds. Only a unit
 * that mesh wrote is ever replaced or removed.
 *
 * Secret flags (`--api-key`, `--join`) go to a 0600 environment file in the state dir, not into
 * the unit, which every user can read. A system unit runs as the `mesh` system user: install
 * creates it where missing and gives it the state dir, the models dir and its llama.cpp cache.
 *
 * For tests and packaging, MESH_SYSTEMD_DIR puts the unit in that directory instead, and then
 * only files are written (the unit, and the environment file where there are secrets): no
 * systemctl, no user created, nothing chowned; install says what it would have done.
 */
import { accessSync, constants, existsSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, userInfo } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Command } from "../config/parse-cli.ts";
import { llamaCacheRoot } from "../llama/binaries.ts";
import { ENV_FILE_NAME, envFileOfUnit, envFileText } from "../service/env-file.ts";
import { GPU_GROUPS, SERVICE_USER, supplementaryGroups, SYSTEM_DIRS, useraddArgs } from "../service/system-user.ts";
import { buildUnit, isMeshUnit, serviceSecrets, UNIT_NAME, unitDir, type UnitInput } from "../service/unit.ts";
import { CommandError } from "./common.ts";
import { checkOwnership, checkReachable, ensureServiceUser, giveTree, groupExists, seedLlamaCache, type Account } from "./service-account.ts";
import { checkEnvFileOurs, removeEnvFile, writeEnvFile } from "./service-secrets.ts";

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

/** The text of the unit file there now: undefined when absent; someone else's is refused. */
function existing(t: Target, verb: string): string | undefined {
  if (!existsSync(t.file)) return undefined;
  let text: string;
  try {
    text = readFileSync(t.file, "utf8");
  } catch (err) {
    throw fileError(t, "read", err);
  }
  if (!isMeshUnit(text)) {
    throw new CommandError(`${t.file} was not written by \`mesh service install\`; refusing to ${verb} it (move it away first if mesh should manage it)`);
  }
  return text;
}

function printManual(t: Target, why: string, steps: string[]): void {
  console.log(`${why}\nto finish where systemd runs, run:`);
  for (const s of steps) console.log(`  ${systemctlLine(t, s)}`);
}

const NOT_RUN = "MESH_SYSTEMD_DIR is set, so systemctl was not run";
const NOT_DONE = "MESH_SYSTEMD_DIR is set, so no user was created and nothing chowned";

/** A service starts with ProtectSystem=strict: the folders it writes must exist before it does. The state dir holds secrets: 0700. */
function createServiceDirs(dirs: ServiceDirs): void {
  for (const [dir, mode] of [[dirs.stateDir, 0o700], [dirs.modelsDir, 0o755], [dirs.cacheDir, 0o755]] as const) {
    try {
      // Only the folder itself gets `mode`: a recursive mkdir would give it to every parent it creates.
      mkdirSync(dirname(dir), { recursive: true });
      if (!existsSync(dir)) mkdirSync(dir, { mode });
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

interface ServiceDirs {
  stateDir: string;
  modelsDir: string;
  /** $XDG_CACHE_HOME of the service; llama.cpp goes in its `mesh` folder, cacheDir. */
  cacheHome: string;
  cacheDir: string;
}

/**
 * The service's folders, absolute. A system unit given no --state-dir or --models-dir uses the
 * system's places (SYSTEM_DIRS), never the home of whoever ran install, which the mesh user cannot enter.
 */
function serviceDirs(cmd: ServiceCommand, cwd: string): ServiceDirs {
  const given = (flag: string) => cmd.config.settingSources[flag] !== "default";
  const system = !cmd.user;
  const stateDir = resolve(cwd, system && !given("state-dir") ? SYSTEM_DIRS.stateDir : cmd.config.stateDir);
  const modelsDir = resolve(cwd, system && !given("models-dir") ? SYSTEM_DIRS.modelsDir : cmd.config.modelsDir);
  const cacheHome = system ? SYSTEM_DIRS.cacheHome : resolve(cwd, dirname(dirname(llamaCacheRoot())));
  return { stateDir, modelsDir, cacheHome, cacheDir: join(cacheHome, "mesh") };
}

export function installService(cmd: ServiceCommand): void {
  const t = target(cmd);
  const system = !cmd.user;
  const cwd = process.cwd();
  const command = meshCommand();
  const dirs = serviceDirs(cmd, cwd);
  const llamaDirEnv = cmd.config.llamaDir === undefined ? process.env.MESH_LLAMA_DIR || undefined : undefined;
  const groups = system ? supplementaryGroups(new Set(GPU_GROUPS.filter(groupExists))) : [];
  let text: string;
  let envFile: { path: string; text: string } | undefined;
  try {
    const secrets = serviceSecrets(cmd.nodeArgs);
    if (Object.keys(secrets).length) envFile = { path: join(dirs.stateDir, ENV_FILE_NAME), text: envFileText(secrets) };
    const unitInput: UnitInput = {
      command,
      nodeArgs: cmd.nodeArgs,
      user: cmd.user,
      cwd,
      stateDir: dirs.stateDir,
      modelsDir: dirs.modelsDir,
      cacheHome: dirs.cacheHome,
      llamaDirEnv,
      docs: readmeUri(command),
      envFile: envFile?.path,
      runAs: system ? { user: SERVICE_USER, group: SERVICE_USER, supplementaryGroups: groups } : undefined,
    };
    text = buildUnit(unitInput);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  if (system) checkOwnership(dirs.stateDir, dirs.modelsDir);
  const before = existing(t, "replace");
  const oldEnvFile = before === undefined ? undefined : envFileOfUnit(before);
  checkWritable(t, "write");
  if (envFile) checkEnvFileOurs(envFile.path);

  let account: Account | undefined;
  if (system && t.live) {
    const llamaDir = cmd.config.llamaDir ?? llamaDirEnv;
    checkReachable(command, [dirs.stateDir, dirs.modelsDir, dirs.cacheDir, ...(llamaDir === undefined ? [] : [resolve(cwd, llamaDir)])]);
    const user = ensureServiceUser(dirs.stateDir);
    account = user.account;
    if (user.created) console.log(`created the system user ${SERVICE_USER} (home ${dirs.stateDir}, no login shell)`);
  }
  if (t.live) createServiceDirs(dirs);
  if (system && t.live) seedLlamaCache(dirs.cacheDir);
  if (envFile) {
    writeEnvFile(envFile.path, envFile.text, account);
    console.log(`wrote ${envFile.path} (mode 0600), which holds the secret flags' values`);
  }
  if (oldEnvFile !== undefined && oldEnvFile !== envFile?.path) removeEnvFile(oldEnvFile);
  if (account) {
    giveTree(dirs.stateDir, account, true);
    giveTree(dirs.modelsDir, account, false);
    giveTree(dirs.cacheDir, account, true);
    console.log(`gave ${dirs.stateDir} (and all in it), ${dirs.modelsDir} and ${dirs.cacheDir} (and all in it) to ${SERVICE_USER}:${SERVICE_USER}`);
  } else if (system) {
    const useradd = useraddArgs("useradd", dirs.stateDir, "/usr/sbin/nologin").join(" ");
    console.log(
      `the unit runs as the user ${SERVICE_USER}; ${NOT_DONE}: where it is missing, \`${useradd}\` creates it, and ${dirs.stateDir} (recursively), ${dirs.modelsDir} and ${dirs.cacheDir} (recursively) are given to ${SERVICE_USER}:${SERVICE_USER}`,
    );
  }

  const tmp = `${t.file}.${process.pid}.tmp`;
  try {
    mkdirSync(dirname(t.file), { recursive: true });
    writeFileSync(tmp, text, { mode: 0o644 });
    renameSync(tmp, t.file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw fileError(t, "write", err);
  }
  console.log(`${before !== undefined ? "replaced" : "wrote"} ${t.file}`);

  const start = before !== undefined ? [`enable ${UNIT_NAME}`, `restart ${UNIT_NAME}`] : [`enable --now ${UNIT_NAME}`];
  if (!t.live) return printManual(t, `not started: ${NOT_RUN}`, ["daemon-reload", ...start]);
  const failed = [["daemon-reload"], ...start.map((s) => s.split(" "))].reduce<string | undefined>((f, args) => f ?? systemctl(t, ...args), undefined);
  if (failed) return printManual(t, `not started: ${failed}`, ["daemon-reload", ...start]);
  const journal = `journalctl ${t.user ? "--user " : ""}-u mesh -f`;
  console.log(`${UNIT_NAME} is enabled and ${before !== undefined ? "restarted" : "started"}; \`${journal}\` follows its log, \`${systemctlLine(t, "status mesh")}\` shows how it is`);
  if (t.user && !existsSync(`/var/lib/systemd/linger/${userInfo().username}`)) {
    console.log("a user unit runs while you are logged in; `loginctl enable-linger` keeps it running after you log out and starts it at boot");
  }
}

export function uninstallService(cmd: ServiceCommand): void {
  const t = target(cmd);
  const before = existing(t, "remove");
  if (before === undefined) return void console.log(`no ${UNIT_NAME} at ${t.file}; nothing to remove`);
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
  const envFile = envFileOfUnit(before);
  if (envFile !== undefined) removeEnvFile(envFile);
  const reloadFailed = t.live ? systemctl(t, "daemon-reload") : undefined;
  if (stopFailed) printManual(t, `not stopped: ${stopFailed}`, [`stop ${UNIT_NAME}`, "daemon-reload"]);
  else if (reloadFailed) printManual(t, `not reloaded: ${reloadFailed}`, ["daemon-reload"]);
}
