/**
 * The frame every lab test file shares: why the lab cannot run here (its tests then skip, saying
 * so), the test models loaded once, one lab per test closed after it with whatever else the test
 * made, every child process killed at the end, and the rows of the fault table the file recorded
 * printed as one table under the file's title.
 */
import { afterAll, afterEach, beforeAll, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { faultTable, recordFault, type FaultOutcome } from "./fault-table.ts";
import { Lab, labUnavailable } from "../../harness/lab/lab.ts";

type ModelSpec = Parameters<typeof testModel>;

export interface LabSuite<K extends string> {
  /** Why the lab cannot run here, or undefined. */
  skip: string | undefined;
  /** `test`, skipped where the lab cannot run. */
  labTest: ReturnType<typeof test.skipIf>;
  /** The test models by the names given, as paths; filled before the first test. */
  models: Record<K, string>;
  /** A new lab for the running test, closed after it. */
  newLab(): Promise<Lab>;
  /** Something else the running test made, undone after it (after its lab is closed). */
  afterTest(undo: () => void | Promise<void>): void;
  /** Records a row of the fault table, and keeps it for the file's table. */
  record(o: FaultOutcome): void;
}

export function labSuite<K extends string = never>(title: string, specs: Record<K, ModelSpec> = {} as Record<K, ModelSpec>): LabSuite<K> {
  const skip = labUnavailable();
  if (skip) console.log(`SKIP ${title}: ${skip}`);
  const models = {} as Record<K, string>;
  const rows: FaultOutcome[] = [];
  let lab: Lab | undefined;
  const undos: (() => void | Promise<void>)[] = [];

  beforeAll(async () => {
    if (skip !== undefined) return;
    for (const [name, spec] of Object.entries(specs) as [K, ModelSpec][]) models[name] = await testModel(...spec);
  });
  afterEach(async () => {
    await lab?.close();
    lab = undefined;
    for (const undo of undos.splice(0)) await undo();
  });
  afterAll(async () => {
    await killAllChildren();
    if (rows.length) console.log(`\n${title}\n${faultTable(rows)}`);
  });

  return {
    skip,
    labTest: test.skipIf(skip !== undefined),
    models,
    async newLab() {
      lab = await Lab.create();
      return lab;
    },
    afterTest: (undo) => void undos.push(undo),
    record(o) {
      recordFault(o);
      rows.push(o);
    },
  };
}
