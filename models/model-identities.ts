/**
 * This node's own models' content identities (`models/content-identity.ts`), worked out in the
 * background.
 */
import { statSync } from "node:fs";
import { contentIdentity, type IdentityFile } from "./content-identity.ts";
import type { ModelInfo } from "./model-store.ts";
import { fileVersion, type FileHasher } from "./file-hasher.ts";
import { filesToServe } from "./peer-transfer.ts";

/**
 * The identities of this node's own models, worked out in the background one model at a time (a
 * multi-GB model is read once per file version: the hasher keeps what it read) and told to
 * `onChange`, so the node announces them once known: at most once a second while it works, and
 * when it is done (a models dir of thousands, hashed already, is one change, not thousands of
 * announcements worked out again).
 */
const TELL_EVERY_MS = 1_000;

export class ModelIdentities {
  /** Moves whenever identities become known (in batches, see above). */
  version = 0;
  private readonly known = new Map<string, { key: string; identity: string }>();
  private readonly queued = new Map<string, ModelInfo>();
  private working = false;

  constructor(
    private readonly hasher: FileHasher,
    private readonly onChange: () => void,
  ) {}

  /** `m`'s identity as its files are now; undefined while it is being worked out (it is then queued). */
  of(m: ModelInfo): string | undefined {
    const key = versionKey(m);
    if (key === undefined) return undefined;
    const hit = this.known.get(m.name);
    if (hit?.key === key) return hit.identity;
    this.queued.set(m.name, m);
    if (!this.working) void this.work();
    return undefined;
  }

  /**
   * `name` was deleted: forgotten, and the identity it had returned (what was kept for it, such as
   * its saved slots, may go with it). An identity names its files as peers list them, the model's
   * name among them, so no other model here has it.
   */
  forget(name: string): string | undefined {
    const gone = this.known.get(name);
    this.known.delete(name);
    this.queued.delete(name);
    return gone?.identity;
  }

  private async work(): Promise<void> {
    this.working = true;
    // Never within the caller's turn: it is working out an announcement.
    await Promise.resolve();
    let told = performance.now();
    let untold = false;
    const tell = () => {
      this.version++;
      this.onChange();
      told = performance.now();
      untold = false;
    };
    try {
      for (let next = this.queued.values().next(); !next.done; next = this.queued.values().next()) {
        const m = next.value;
        this.queued.delete(m.name);
        const key = versionKey(m);
        if (key === undefined || this.known.get(m.name)?.key === key) continue;
        try {
          const files: IdentityFile[] = [];
          for (const [name, path] of filesToServe(m.name, m)) files.push({ name, ...(await this.hasher.digest(path)) });
          // A file that changed while it was read is worked out again when next asked for.
          if (versionKey(m) !== key) continue;
          this.known.set(m.name, { key, identity: contentIdentity(files) });
          untold = true;
          if (performance.now() - told >= TELL_EVERY_MS) tell();
        } catch {
          // Unreadable now (being replaced, removed): none is announced, and the next ask tries again.
        }
      }
    } finally {
      this.working = false;
      if (untold) tell();
    }
  }
}

/** The files' paths and versions (as the hasher tells them): an identity holds while they do. Undefined when one cannot be read (or it lists none). */
function versionKey(m: Pick<ModelInfo, "files" | "mmproj">): string | undefined {
  if (m.files.length === 0) return undefined;
  try {
    return [...m.files, ...(m.mmproj ? [m.mmproj] : [])].map((f) => `${f}:${fileVersion(statSync(f))}`).join("\n");
  } catch {
    return undefined;
  }
}
