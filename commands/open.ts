/**
 * `mesh open`: the console's URL of the node at --listen:--port, opened in the desktop's browser
 * when there is a desktop, printed always. A headless box (under systemd, over SSH) gets the URL and
 * how to reach it from the machine in front of the user.
 */
import type { Config } from "../config/config.ts";
import { CommandError, localUrl } from "./common.ts";

/** The program that opens a URL on this platform's desktop, if it has one (pure). */
export function opener(platform: string, env: Record<string, string | undefined>): string | undefined {
  if (platform === "darwin") return "open";
  if (platform === "win32") return "explorer";
  return env.DISPLAY || env.WAYLAND_DISPLAY ? "xdg-open" : undefined;
}

export async function openConsole(config: Config, print: boolean): Promise<void> {
  const url = `${localUrl(config)}/`;
  const answers = await fetch(`${localUrl(config)}/health`, { signal: AbortSignal.timeout(2_000) }).then(
    (r) => r.ok,
    () => false,
  );
  console.log(url);
  if (!answers) throw new CommandError(`no node answers at ${url} (start one with \`mesh\`, or name its --listen and --port)`);
  const program = print ? undefined : opener(process.platform, process.env);
  if (!program) {
    if (!print) console.error(`no desktop here to open it in; from your own machine: ssh -L ${config.port}:127.0.0.1:${config.port} <this host>, then open http://127.0.0.1:${config.port}/`);
    return;
  }
  // The URL is built from this node's own settings, never from input; no shell is involved.
  const child = Bun.spawn([program, url], { stdio: ["ignore", "ignore", "ignore"] });
  if ((await child.exited) !== 0 && program !== "explorer") console.error(`${program} could not open it; open ${url} yourself`);
}
