/**
 * The only file that imports `@number0/iroh` (pinned at 0.35.0: its streams move Uint8Array, the
 * 1.x binding moves Array<number> at a fraction of the speed). Keeping every iroh call here makes a
 * later move to another version one file of work.
 */
import irohPkg from "@number0/iroh/package.json" with { type: "json" };

export const IROH_BINDING_VERSION: string = irohPkg.version;

/**
 * Loads the native addon and says which binding runs. `mesh --version` calls it, which also proves
 * that a compiled `mesh` carries the addon inside it.
 */
export async function describeTransport(): Promise<string> {
  const { Iroh } = await import("@number0/iroh");
  if (typeof Iroh.memory !== "function") throw new Error("the iroh native addon loaded without Iroh.memory");
  return `iroh ${IROH_BINDING_VERSION} (${process.platform}-${process.arch} addon)`;
}
