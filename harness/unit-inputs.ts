/** The unit inputs the service tests share: a plain install, awkward flags and paths, and a system install as the mesh user. */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { UnitInput } from "../service/unit.ts";

export const base: UnitInput = {
  command: ["/usr/local/bin/mesh"],
  nodeArgs: [],
  user: false,
  cwd: "/srv/work",
  stateDir: "/var/lib/mesh/state",
  modelsDir: "/var/lib/mesh/models",
  cacheHome: "/root/.cache",
};

/** Flags whose words need every kind of quoting systemd has, and a secret that must stay out of the unit. */
export const TRICKY = ["--model", "my model.gguf", "--model", `a$b%c"d\\e'f`, "--model", "$HOME ${HOME} %h %%", "--model", ";", "--model", "", "--api-key", "sk-left-out", "--llamacpp-args", "--threads 4 --ctx-size 8"];
export const AS_MESH: Partial<UnitInput> = { envFile: "/var/lib/mesh/state/service.env", runAs: { user: "mesh", group: "mesh", supplementaryGroups: ["video", "render"] } };

/** Fresh directories others can read (the manager in test mode runs as nobody when we are root); `remove` cleans them all. */
export function readableTempDirs(): { fresh: () => string; remove: () => void } {
  const made: string[] = [];
  return {
    fresh: () => {
      const dir = mkdtempSync(join(tmpdir(), "mesh-unit-"));
      chmodSync(dir, 0o777);
      made.push(dir);
      return dir;
    },
    remove: () => {
      for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}
