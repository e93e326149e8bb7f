/**
 * Messages between the server and the sandbox worker go in batches: everything queued during one
 * turn of the event loop leaves in one IPC write (under load that is many invocations per write,
 * which saves most of the per-message cost).
 */
export function batcher<M>(write: (batch: M[], onError: (err: Error) => void) => void, onError: (batch: M[], err: Error) => void): (msg: M) => void {
  let queue: M[] = [];
  const flush = () => {
    const batch = queue;
    queue = [];
    write(batch, (err) => onError(batch, err));
  };
  return (msg: M) => {
    queue.push(msg);
    if (queue.length === 1) setImmediate(flush);
  };
}
