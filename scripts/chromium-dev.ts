/**
 * Provides the Chromium the browser tests drive (Debian's `chromium`, through playwright-core):
 * found where Debian puts it, or installed with apt-get when this runs as root on a machine that has
 * it (CI, a fresh dev box); elsewhere the browser tests skip and say why. MESH_CHROMIUM, when set, wins.
 */
import { existsSync } from "node:fs";

export const DEBIAN_CHROMIUM = "/usr/bin/chromium";

async function aptInstall(): Promise<boolean> {
  const run = async (argv: string[]) => (await Bun.spawn(argv, { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } }).exited) === 0;
  return (await run(["apt-get", "update", "-qq"])) && (await run(["apt-get", "install", "-y", "-qq", "chromium"]));
}

/** The browser's path, or why there is none. */
export async function provideChromium(): Promise<{ path: string } | { missing: string }> {
  const fromEnv = process.env.MESH_CHROMIUM;
  if (fromEnv) return existsSync(fromEnv) ? { path: fromEnv } : { missing: `MESH_CHROMIUM=${fromEnv} does not exist` };
  if (existsSync(DEBIAN_CHROMIUM)) return { path: DEBIAN_CHROMIUM };
  if (process.getuid?.() !== 0 || !Bun.which("apt-get")) return { missing: `no ${DEBIAN_CHROMIUM}; install Debian's chromium (apt-get install chromium) to run the browser tests` };
  console.error("installing Debian's chromium for the browser tests (apt-get)...");
  if ((await aptInstall()) && existsSync(DEBIAN_CHROMIUM)) return { path: DEBIAN_CHROMIUM };
  return { missing: "apt-get could not install chromium" };
}
