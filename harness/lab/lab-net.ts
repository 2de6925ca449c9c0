/**
 * The lab's network plumbing: `ip`/`tc` commands, the names a lab gives its namespaces, links and
 * mounts, claiming a /24 no other lab on the machine uses, and removing what dead labs left. Names
 * carry the owning test process's pid, so a lab can tell its own leftovers from a live neighbour's.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Runs a command to completion; throws with its stderr when it fails (unless `ok` allows failure). */
export function sh(argv: string[], opts: { ok?: boolean } = {}): { code: number; out: string; err: string } {
  const r = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" });
  const res = { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
  if (res.code !== 0 && !opts.ok) throw new Error(`${argv.join(" ")} failed (${res.code}): ${res.err.trim()}`);
  return res;
}

export const inNs = (ns: string, argv: string[]): string[] => ["ip", "netns", "exec", ns, ...argv];

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** What a lab calls its things; interface names stay within Linux's 15 characters. */
export interface LabNames {
  pid: number;
  lab: number;
  ns(i: number): string;
  bridge(n: number): string;
  /** The bridge-side (`h`) and namespace-side (`n`) ends of node i's veth pair. */
  veth(i: number, side: "h" | "n"): string;
}

const NS_PREFIX = "mesh-lab-";
const LINK = /^ml([0-9a-z]+)-/;
const NS = /^mesh-lab-(\d+)-/;

export function labNames(pid: number, lab: number): LabNames {
  const p = pid.toString(36);
  const l = lab.toString(36);
  return {
    pid,
    lab,
    ns: (i) => `${NS_PREFIX}${pid}-${lab}-${i}`,
    bridge: (n) => `ml${p}-${l}b${n.toString(36)}`,
    veth: (i, side) => `ml${p}-${l}${side}${i.toString(36)}`,
  };
}

const CLAIMS = join(tmpdir(), "mesh-lab-claims");

/** Claims 10.201.n.0/24 (n counting up past 255 into 10.202.x) for this process; the claim is a file naming its pid. */
export function claimSubnet(pid: number): { prefix: string; release(): void } {
  mkdirSync(CLAIMS, { recursive: true });
  const routes = sh(["ip", "-4", "route", "show"]).out;
  for (let n = 0; n < 512; n++) {
    const prefix = `10.${201 + Math.floor(n / 256)}.${n % 256}`;
    if (routes.includes(`${prefix}.0/24`)) continue;
    const file = join(CLAIMS, `subnet-${n}`);
    try {
      writeFileSync(file, String(pid), { flag: "wx" });
    } catch {
      continue;
    }
    return { prefix, release: () => rmSync(file, { force: true }) };
  }
  throw new Error(`no free 10.201-202.x.0/24 for a lab (claims in ${CLAIMS})`);
}

/** Where a lab mounts its tmpfs dirs: named by pid so a dead lab's mounts can be found. */
export const tmpfsDir = (names: LabNames, i: number) => join(tmpdir(), `${NS_PREFIX}tmpfs-${names.pid}-${names.lab}-${i}`);
const TMPFS = /mesh-lab-tmpfs-(\d+)-/;

/** Removes namespaces, links, mounts and subnet claims of labs whose test process is gone. */
export function cleanDeadLabs(): string[] {
  const removed: string[] = [];
  for (const line of sh(["ip", "netns", "list"], { ok: true }).out.split("\n")) {
    const ns = line.split(" ")[0] ?? "";
    const m = NS.exec(ns);
    if (!m || alive(Number(m[1]))) continue;
    killNsProcesses(ns);
    sh(["ip", "netns", "del", ns], { ok: true });
    removed.push(ns);
  }
  for (const line of sh(["ip", "-o", "link", "show"], { ok: true }).out.split("\n")) {
    const name = /^\d+:\s+([^:@]+)/.exec(line)?.[1];
    const m = name ? LINK.exec(name) : null;
    if (!name || !m || alive(parseInt(m[1]!, 36))) continue;
    sh(["ip", "link", "del", name], { ok: true });
    removed.push(name);
  }
  for (const line of readFileSync("/proc/mounts", "utf8").split("\n")) {
    const point = line.split(" ")[1] ?? "";
    const m = TMPFS.exec(point);
    if (!m || alive(Number(m[1]))) continue;
    sh(["umount", "-l", point], { ok: true });
    rmSync(point, { recursive: true, force: true });
    removed.push(point);
  }
  let claims: string[] = [];
  try {
    claims = readdirSync(CLAIMS);
  } catch {
    // no lab ever ran here
  }
  for (const f of claims) {
    const file = join(CLAIMS, f);
    const pid = Number(readFileSync(file, "utf8").trim());
    if (!alive(pid)) rmSync(file, { force: true });
  }
  return removed;
}

export function nsPids(ns: string): number[] {
  return sh(["ip", "netns", "pids", ns], { ok: true })
    .out.split("\n")
    .filter(Boolean)
    .map(Number);
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
  } catch {
    return "";
  }
}

export function killNsProcesses(ns: string): void {
  for (const pid of nsPids(ns)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
}

/** tc tbf on one device: `mbit` Mbit/s with a burst a 250 Hz timer can refill and a 100 ms queue. */
export function tbfArgs(dev: string, mbit: number): string[] {
  const burst = Math.max(64 * 1024, Math.ceil((mbit * 1e6) / 8 / 100));
  return ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", `${mbit}mbit`, "burst", String(burst), "latency", "100ms"];
}
