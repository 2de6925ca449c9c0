/**
 * The machine side of the system unit's account (service/system-user.ts decides): checks that the
 * mesh user can reach what it needs and may own what it is given, looks up users and groups,
 * creates the `mesh` system user, and hands the service's folders to it. Every step either works
 * or throws a CommandError that says what to do instead.
 */
import { cpSync, existsSync, lchownSync, readFileSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { llamaCacheRoot } from "../llama/binaries.ts";
import { blockedFor, nologinShell, ownershipRefusal, SERVICE_USER, SYSTEM_DIRS, useraddArgs, type PathNeed } from "../service/system-user.ts";
import { CommandError } from "./common.ts";

export interface Account {
  uid: number;
  gid: number;
}

/** One entry of the passwd or group database: getent where there is one (NSS), else the local file. */
function lookup(db: "passwd" | "group", name: string): string[] | undefined {
  const getent = Bun.which("getent");
  if (getent) {
    const r = Bun.spawnSync([getent, db, name], { stdin: "ignore", stdout: "pipe", stderr: "ignore", timeout: 10_000 });
    return r.exitCode === 0 ? r.stdout.toString().trim().split("\n")[0]!.split(":") : undefined;
  }
  let text = "";
  try {
    text = readFileSync(`/etc/${db}`, "utf8");
  } catch {
    return undefined;
  }
  return text.split("\n").map((l) => l.split(":")).find((f) => f[0] === name);
}

export const groupExists = (name: string) => lookup("group", name) !== undefined;

/** The home dirs of the users this machine lists but mesh (whose home is its state dir), for ownershipRefusal. */
export function knownHomes(): string[] {
  try {
    const users = readFileSync("/etc/passwd", "utf8").split("\n").map((l) => l.split(":"));
    return users.filter((f) => f[0] !== SERVICE_USER).map((f) => f[5] ?? "").filter((h) => h.startsWith("/") && h !== "/");
  } catch {
    return [];
  }
}

export function findServiceUser(): Account | undefined {
  const [uid, gid] = (lookup("passwd", SERVICE_USER) ?? []).slice(2, 4).map((f) => (/^\d+$/.test(f) ? Number(f) : NaN));
  return uid !== undefined && gid !== undefined && !Number.isNaN(uid) && !Number.isNaN(gid) ? { uid, gid } : undefined;
}

/** The `mesh` system user, created with its group when missing (home: the state dir, no login shell). */
export function ensureServiceUser(stateDir: string): { account: Account; created: boolean } {
  const found = findServiceUser();
  if (found) return { account: found, created: false };
  const manual = `create a system user and group named ${SERVICE_USER} (home ${stateDir}, no login shell) with this system's tools, then run this again; or add --user for a unit that runs as you`;
  const useradd = Bun.which("useradd") ?? ["/usr/sbin/useradd", "/sbin/useradd"].find(existsSync);
  if (!useradd) throw new CommandError(`the system unit runs as the user ${SERVICE_USER}, and useradd is not installed to create it: ${manual}`);
  const argv = useraddArgs(useradd, stateDir, nologinShell(existsSync));
  const r = Bun.spawnSync(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  const account = r.exitCode === 0 ? findServiceUser() : undefined;
  if (!account) {
    const why = r.stderr.toString().trim() || `exit ${r.exitCode ?? "timeout"}`;
    throw new CommandError(`\`${argv.join(" ")}\` failed: ${why.split("\n").join("; ")}; ${manual}`);
  }
  return { account, created: true };
}

/** GNU chown, whose `-R -P` walk is the one giveTree trusts; undefined where there is none. */
function gnuChown(): string | undefined {
  // Some systems ship GNU coreutils beside another implementation under a `gnu` prefix.
  for (const name of ["chown", "gnuchown"]) {
    const path = Bun.which(name);
    if (!path) continue;
    const r = Bun.spawnSync([path, "--version"], { stdin: "ignore", stdout: "pipe", stderr: "ignore", timeout: 10_000 });
    if (r.exitCode === 0 && /GNU coreutils/.test(r.stdout.toString())) return path;
  }
  return undefined;
}

/**
 * Gives `dir` (and, with `recursive`, everything in it) to the account. This runs as root over a
 * tree the mesh user owns and may be changing while we walk it: a walk by path (lstat, then readdir
 * and lchown of `dir/entry`) follows a directory the service swapped for a link in between, and
 * hands whatever the link points at (/etc...) to mesh. GNU `chown -R -P` walks by descriptor (fts
 * with openat and O_NOFOLLOW, checking each directory it enters is the one it saw) and changes
 * links themselves, so no swap can lead it out of the tree; Node has no openat to do the same here.
 * An explicit argv with `--`: no shell, and no name taken for an option.
 */
export function giveTree(dir: string, account: Account, recursive: boolean): void {
  const refuse = (why: string) => new CommandError(`cannot give ${dir} to the user ${SERVICE_USER}: ${why}`);
  if (!recursive) {
    // One call on one path: lchown changes a link itself and follows none.
    try {
      lchownSync(dir, account.uid, account.gid);
    } catch (err) {
      throw refuse((err as Error).message);
    }
    return;
  }
  const chown = gnuChown();
  if (!chown) {
    throw refuse(`that takes GNU chown (coreutils), which never follows a link the service may have left in its folders, and none is installed; install coreutils, or stop the service and run \`chown -R -P ${account.uid}:${account.gid} ${dir}\` yourself`);
  }
  const r = Bun.spawnSync([chown, "-R", "-P", "-h", `${account.uid}:${account.gid}`, "--", dir], { stdin: "ignore", stdout: "ignore", stderr: "pipe", timeout: 600_000 });
  if (r.exitCode !== 0) throw refuse(r.stderr.toString().trim().split("\n").join("; ") || `chown exited ${r.exitCode ?? "on its timeout"}`);
}

/** A path's permission bits, undefined where nothing is there. */
function modeOf(path: string): number | undefined {
  try {
    return statSync(path).mode;
  } catch {
    return undefined;
  }
}

/** Refuses folders install must not hand to the mesh user (a home, /var/lib itself, /etc...). */
export function checkOwnership(stateDir: string, modelsDir: string): void {
  const homes = [...knownHomes(), homedir()];
  for (const [flag, dir, instead] of [["--state-dir", stateDir, SYSTEM_DIRS.stateDir], ["--models-dir", modelsDir, SYSTEM_DIRS.modelsDir]] as const) {
    const why = ownershipRefusal(dir, homes);
    if (why) throw new CommandError(`${flag} ${dir}: the system unit gives this folder to the user ${SERVICE_USER}, and ${why}; choose a folder of its own, such as ${instead}`);
  }
}

/** Fails before anything changes when the mesh user could not run `command` or reach `dirs`. */
export function checkReachable(command: readonly string[], dirs: readonly string[]): void {
  const needs: PathNeed[] = [
    { path: command[0]!, access: "x" },
    ...command.slice(1).map((path): PathNeed => ({ path, access: "r" })),
    ...dirs.map((path): PathNeed => ({ path, access: "dir" })),
  ];
  const blocked = needs.flatMap((n) => {
    const why = blockedFor(n, modeOf);
    return why ? [`${n.path}: ${why}`] : [];
  });
  if (blocked.length) {
    throw new CommandError(
      `the system unit runs as the user ${SERVICE_USER}, who could not reach ${blocked.join("; ")}. Put mesh and its folders where other users can reach them (e.g. /usr/local/bin/mesh, ${SYSTEM_DIRS.stateDir}), or add --user for a unit that runs as you`,
    );
  }
}

/** The llama.cpp this user has cached, copied into the service's cache dir, so the service starts without a download. */
export function seedLlamaCache(cacheDir: string): void {
  const mine = llamaCacheRoot();
  const theirs = join(cacheDir, "llama.cpp");
  if (resolve(mine) === theirs || !existsSync(mine) || existsSync(theirs)) return;
  try {
    cpSync(mine, theirs, { recursive: true, verbatimSymlinks: true });
    console.log(`copied ${mine} to ${theirs} for the service`);
  } catch (err) {
    rmSync(theirs, { recursive: true, force: true });
    console.log(`the service will fetch llama.cpp at its first start: copying ${mine} to ${theirs} failed (${(err as Error).message})`);
  }
}
