/** Entry file of the sandbox worker process in a source checkout (see workerCommand()). */
import { runWorker } from './worker-main.ts';

runWorker();
