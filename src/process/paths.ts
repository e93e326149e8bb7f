import { join } from 'node:path';

/** Where serving process `index` keeps its crash record (read by the supervisor when it dies). */
export function crashRecordFile(dataDir: string, index: number): string {
  return join(dataDir, 'run', `serving-${index}.json`);
}
