/**
 * Who the system unit runs as, decided at install time: a dedicated `mesh` system user, never root,
 * with the GPU device groups this machine has, and where it keeps its things when no directory was
 * given. Pure: the caller looks the machine up (groups present, file modes) and acts on the answer.
 */
import { dirname } from "node:path";

export const SERVICE_USER = "mesh";

/**
 * The system service's directories when none was given. Root's home (the default for a command run
 * with sudo) is closed to other users, so the mesh user keeps its state, models and llama.cpp in
 * the places a system service uses; its home is the state dir.
 */
export const SYSTEM_DIRS = { stateDir: "/var/lib/mesh", modelsDir: "/var/lib/mesh/models", cacheHome: "/var/cache" } as const;

/** Groups that own GPU device nodes: /dev/dri/* (video, render) and AMD's /dev/kfd (render). */
export const GPU_GROUPS = ["video", "render"] as const;

/** SupplementaryGroups= for the unit: the GPU groups present here (a group that is not there would stop the unit from starting). */
export function supplementaryGroups(present: ReadonlySet<string>): string[] {
  return GPU_GROUPS.filter((g) => present.has(g));
}

const NOLOGIN = ["/usr/sbin/nologin", "/sbin/nologin", "/bin/false"];

/** The login shell of a user nobody logs in as: the first of these that exists. */
export function nologinShell(exists: (path: string) => boolean): string {
  return NOLOGIN.find(exists) ?? "/bin/false";
}

/** argv that creates the system user (and its group), with the state dir as its home, created by install itself. */
export function useraddArgs(useradd: string, stateDir: string, shell: string): string[] {
  return [useradd, "--system", "--user-group", "--home-dir", stateDir, "--no-create-home", "--shell", shell, SERVICE_USER];
}

export interface PathNeed {
  path: string;
  /** What the service does with it: `x` runs it, `r` reads it; a directory it owns needs only a way in. */
  access: "x" | "r" | "dir";
}

/**
 * The first reason the mesh user could not use `need`, or undefined: a directory on the way that
 * other users cannot enter (o+x), or, for a file it runs or reads, that file's own mode. `modeOf`
 * gives a path's permission bits, undefined where nothing is there yet (install creates it, 0755).
 * Directories the service writes are chowned to it, so their own mode does not matter.
 */
export function blockedFor(need: PathNeed, modeOf: (path: string) => number | undefined): string | undefined {
  const octal = (m: number) => `0${(m & 0o777).toString(8)}`;
  const ancestors: string[] = [];
  for (let d = dirname(need.path); d !== "/" && d !== "."; d = dirname(d)) ancestors.unshift(d);
  for (const dir of ancestors) {
    const mode = modeOf(dir);
    if (mode !== undefined && (mode & 0o001) === 0) return `${dir} lets no other user in (mode ${octal(mode)})`;
  }
  if (need.access === "dir") return undefined;
  const mode = modeOf(need.path);
  const bit = need.access === "x" ? 0o001 : 0o004;
  if (mode !== undefined && (mode & bit) === 0) return `${need.path} is not ${need.access === "x" ? "executable" : "readable"} by other users (mode ${octal(mode)})`;
  return undefined;
}

/** Trees of the system itself: never handed to the mesh user, whatever --state-dir says. */
const SYSTEM_TREES = ["/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr"];
/** Shared folders that hold other programs' data. */
const SHARED_DIRS = ["/root", "/var/cache", "/var/lib", "/var/local", "/var/log", "/var/mail", "/var/opt", "/var/spool", "/var/tmp"];

/**
 * Why install must not give `dir` to the mesh user (it chowns the state dir), or undefined: a
 * top-level or shared folder, part of the system, or someone's home. `homes` are the home dirs of
 * users this machine knows of (install adds the one it runs as); /home/NAME counts as one too.
 */
export function ownershipRefusal(dir: string, homes: readonly string[]): string | undefined {
  const parts = dir.split("/").filter(Boolean);
  if (parts.length < 2) return `${dir} is a top-level folder`;
  const tree = SYSTEM_TREES.find((t) => dir === t || dir.startsWith(`${t}/`));
  if (tree) return `${dir} is part of the system (${tree})`;
  if (SHARED_DIRS.includes(dir)) return `${dir} holds other programs' data`;
  if (homes.includes(dir) || (parts.length === 2 && parts[0] === "home")) return `${dir} is a user's home`;
  return undefined;
}
