/**
 * Devices a recipe occupies, as a bitmask, and the NPU rule: only one model may hold the NPU, so a
 * load whose recipe uses it evicts every other NPU holder whatever its type or the slot limit.
 * Only the `llamacpp` recipe ships; the rule is kept general so an NPU recipe is one table row.
 */

export const Device = { CPU: 1, GPU: 2, NPU: 4 } as const;
export type DeviceMask = number;

export const RECIPES = ["llamacpp"] as const;
export type Recipe = (typeof RECIPES)[number];

/** `llamacpp` runs on the GPU when its build sees one, else on the CPU. */
export function recipeDevices(recipe: Recipe, hasGpu: boolean): DeviceMask {
  switch (recipe) {
    case "llamacpp":
      return hasGpu ? Device.GPU : Device.CPU;
  }
}

export function deviceNames(mask: DeviceMask): string[] {
  return (Object.entries(Device) as [string, number][]).filter(([, bit]) => mask & bit).map(([name]) => name.toLowerCase());
}

/** The servers a new load on `wants` must evict for NPU exclusivity. */
export function npuConflicts<T extends { devices: DeviceMask }>(loaded: readonly T[], wants: DeviceMask): T[] {
  if (!(wants & Device.NPU)) return [];
  return loaded.filter((s) => s.devices & Device.NPU);
}
