/**
 * Progress of a long download: a bar on a terminal (cli-progress, on stderr), else a log line
 * every few seconds and one at the end, so journald and CI logs show it without flooding.
 */
import cliProgress from "cli-progress";
import type { Log } from "./log.ts";

export interface Progress {
  update(bytes: number, total: number): void;
  done(): void;
}

const LINE_EVERY_MS = 2_000;
const mib = (b: number) => (b / 2 ** 20).toFixed(1);

export function progressReporter(label: string, log: Log, tty = process.stderr.isTTY === true): Progress {
  if (tty) {
    const bar = new cliProgress.SingleBar(
      { format: `${label} [{bar}] {percentage}% {value}/{total} MiB`, stream: process.stderr, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update: (bytes, total) => {
        if (!started) bar.start(Number(mib(total)), 0);
        started = true;
        bar.setTotal(Number(mib(total)));
        bar.update(Number(mib(bytes)));
      },
      done: () => started && bar.stop(),
    };
  }
  let last = 0;
  let latest = { bytes: 0, total: 0 };
  const line = () => {
    const pct = latest.total ? ` ${((100 * latest.bytes) / latest.total).toFixed(0)}%` : "";
    log.info(`${label}:${pct}`, { mib: mib(latest.bytes), totalMib: mib(latest.total) });
  };
  return {
    update: (bytes, total) => {
      latest = { bytes, total };
      const now = performance.now();
      if (now - last >= LINE_EVERY_MS) {
        last = now;
        line();
      }
    },
    done: line,
  };
}
