// How the interop clients end: the bridge by the end of its stdin, then a wait for its exit with a
// bound; the run itself by printing its summary, as one JSON object on stdout, with its exit code.

// Close the SDK client (which ends the child's stdin) and wait at most `exitMs` for the child to exit.
// The result is {code, signal}, or {error} when the child did not exit in time: the SDK's close then
// stops it with SIGTERM and SIGKILL, which is not how the bridge must end.
export async function closeAndAwaitExit(client, child, exitMs) {
  const exited = new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(true);
    else child.once('exit', () => resolve(true));
  });
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => resolve(false), exitMs);
  });
  const closed = client.close();
  const inTime = await Promise.race([exited, late]);
  clearTimeout(timer);
  await closed;
  if (!inTime) return { error: `the bridge did not exit within ${exitMs} ms of the end of its stdin` };
  return { code: child.exitCode, signal: child.signalCode };
}

// Run `main` within `wholeRunMs`, then print `summary` and exit: 0 when `main` set `summary.ok`, 1
// when it did not or threw (its error in `summary.error`), 2 when it did not end in time.
export function runClient(summary, wholeRunMs, main) {
  function finish(code) {
    process.stdout.write(JSON.stringify(summary) + '\n');
    process.exit(code);
  }
  const watchdog = setTimeout(() => {
    summary.error = `the run took more than ${wholeRunMs} ms`;
    finish(2);
  }, wholeRunMs);
  main()
    .then(() => {
      clearTimeout(watchdog);
      finish(summary.ok ? 0 : 1);
    })
    .catch((error) => {
      clearTimeout(watchdog);
      summary.error = String(error?.stack ?? error);
      finish(1);
    });
}
