/**
 * The roster at rest, in the state dir (both files 0600, written whole: `private-file.ts`):
 * `roster.json` holds what this node holds of the roster (its public key; the secret key on an
 * owner's machine; a pass and the pass's key on a guest's), `roster-log.json` what the roster
 * signed that this node knows (passes issued, revocations, closing) and the guests it has seen with
 * each pass. The node and the CLI (`mesh token --guest`, `mesh guests revoke`) both write the log,
 * each under its lock; the node reads both again when they change.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { z } from "zod";
import { writePrivateFile } from "../base/private-file.ts";
import { HEX64, PassSchema, publicKeyOf, StatementSchema, type RosterKeys, type Statement } from "./roster.ts";

export const ROSTER_FILE = "roster.json";
export const ROSTER_LOG_FILE = "roster-log.json";
/** Statements kept (passes issued and revocations together) and node ids kept per pass seen. */
export const MAX_STATEMENTS = 4096;
export const MAX_SEEN_PASSES = 4096;
export const NODES_PER_PASS = 16;

const KeysFile = z.object({
  v: z.literal(1),
  roster: z.string().regex(HEX64),
  secret: z.string().regex(HEX64).optional(),
  pass: PassSchema.optional(),
  passSecret: z.string().regex(HEX64).optional(),
});

const SeenSchema = z.object({ name: z.string().max(64), expiresAt: z.number().optional(), nodes: z.array(z.string().regex(HEX64)).max(NODES_PER_PASS), lastSeenAt: z.number() });
export type SeenPass = z.infer<typeof SeenSchema>;

const LogFile = z.object({
  v: z.literal(1),
  statements: z.array(StatementSchema).max(MAX_STATEMENTS),
  seen: z.record(z.string().regex(/^[0-9a-f]{32}$/), SeenSchema).default({}),
});
export type RosterLog = z.infer<typeof LogFile>;

const bytesOf = (h: string) => Uint8Array.from(Buffer.from(h, "hex"));
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

export class RosterFileError extends Error {}

/** What this state dir holds of a roster; undefined when it holds none (an unanchored node). */
export function readRosterKeys(stateDir: string): RosterKeys | undefined {
  const path = join(stateDir, ROSTER_FILE);
  if (!existsSync(path)) return undefined;
  let parsed;
  try {
    parsed = KeysFile.safeParse(JSON.parse(readFileSync(path, "utf8")));
  } catch {
    parsed = undefined;
  }
  if (!parsed?.success) throw new RosterFileError(`${path} is not a roster this version reads; join again with a token from the mesh's owner (\`mesh roster join TOKEN\`)`);
  const f = parsed.data;
  const secret = f.secret ? bytesOf(f.secret) : undefined;
  if (secret && publicKeyOf(secret) !== f.roster) throw new RosterFileError(`${path}: its secret key is not the roster's`);
  return { roster: f.roster, ...(secret ? { secret } : {}), ...(f.pass && f.passSecret ? { pass: f.pass, passSecret: bytesOf(f.passSecret) } : {}) };
}

export function writeRosterKeys(stateDir: string, keys: RosterKeys): void {
  const file: z.infer<typeof KeysFile> = {
    v: 1,
    roster: keys.roster,
    ...(keys.secret ? { secret: hex(keys.secret) } : {}),
    ...(keys.pass && keys.passSecret ? { pass: keys.pass, passSecret: hex(keys.passSecret) } : {}),
  };
  writePrivateFile(join(stateDir, ROSTER_FILE), `${JSON.stringify(file, null, 2)}\n`);
}

const EMPTY_LOG = (): RosterLog => ({ v: 1, statements: [], seen: {} });

/** The roster's log as kept; an empty one when there is none or it cannot be read (the mesh gossips the statements again). */
export function readRosterLog(stateDir: string): RosterLog {
  try {
    const parsed = LogFile.safeParse(JSON.parse(readFileSync(join(stateDir, ROSTER_LOG_FILE), "utf8")));
    return parsed.success ? parsed.data : EMPTY_LOG();
  } catch {
    return EMPTY_LOG();
  }
}

/** Reads, changes and writes the log under its lock, so the node and a CLI command never lose each other's writes. */
export async function updateRosterLog(stateDir: string, change: (log: RosterLog) => RosterLog): Promise<RosterLog> {
  const path = join(stateDir, ROSTER_LOG_FILE);
  const release = await lockfile.lock(stateDir, { lockfilePath: `${path}.lock`, realpath: false, stale: 10_000, retries: { retries: 50, minTimeout: 50, maxTimeout: 500 } });
  try {
    const next = change(readRosterLog(stateDir));
    writePrivateFile(path, `${JSON.stringify(next)}\n`);
    return next;
  } finally {
    await release();
  }
}

/** Adds statements to a log (pure): each once, the newest kept when there are too many. */
export function withStatements(log: RosterLog, added: readonly Statement[], key: (s: Statement) => string): RosterLog {
  const known = new Set(log.statements.map(key));
  const fresh = added.filter((s) => !known.has(key(s)) && (known.add(key(s)), true));
  return fresh.length ? { ...log, statements: [...log.statements, ...fresh].slice(-MAX_STATEMENTS) } : log;
}

/** When a file last changed, to notice another writer (the CLI) cheaply. */
export function fileStamp(stateDir: string, name: string): string {
  try {
    const s = statSync(join(stateDir, name));
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return "none";
  }
}
