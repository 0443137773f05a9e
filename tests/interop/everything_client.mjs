// The TypeScript SDK client (2025-11-25, the client VS Code resembles) in front of server-everything,
// either directly over Streamable HTTP or through the bridge (spawned over stdio), with the same steps.
// It prints what it got as one JSON object on stdout; the test that runs it makes the assertions.
//
// Usage: node everything_client.mjs '<plan as JSON>'
//
// The plan:
//   {"url": "http://...", "timeoutMs": 20000, "waitMs": 10000, "exitMs": 10000,
//    "bridge": {"command": "...", "args": [...], "cwd": "..."}}   (no "bridge": directly to "url")
//
// The steps: initialize, tools/list, resources/list; the server's roots/list (answered) and its log
// message of the roots; resources/subscribe and its log message; toggle-subscriber-updates, the update,
// toggle-subscriber-updates again; trigger-long-running-operation with progress (4 steps);
// gzip-file-as-resource and the resource list change; the end.
//
// The summary:
//   {"ok": true, "sessionId", "delivered": [{"method", "params"}], "handled": [{"method", "params"}],
//    "progress": [...], "requests": [...methods], "waits": {"<name>": true | false}, "exit": {...},
//    "stderr": "<what the bridge wrote on stderr>"}
// "delivered": each notification that the transport delivered to the SDK, in order; "handled": each
// notification that reached a handler of the application; "progress": the progress callbacks.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema
} from '@modelcontextprotocol/sdk/types.js';
import { closeAndAwaitExit, runClient } from './exit.mjs';

const WHOLE_RUN_MS = 100000;
const SUBSCRIBED = 'demo://resource/static/document/architecture.md';

const plan = JSON.parse(process.argv[2]);
const TIMEOUT_MS = plan.timeoutMs ?? 20000;
const WAIT_MS = plan.waitMs ?? 10000;
const EXIT_MS = plan.exitMs ?? 10000;
const summary = { ok: false, delivered: [], handled: [], progress: [], requests: [], waits: {} };

// Wait (at most WAIT_MS) until a handled notification of `method` whose text holds `contains` came.
async function waitFor(name, method, contains = '') {
  const seen = () =>
    summary.handled.some((n) => n.method === method && JSON.stringify(n.params ?? null).includes(contains));
  const deadline = Date.now() + WAIT_MS;
  while (!seen() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  summary.waits[name] = seen();
}

async function main() {
  const transport = plan.bridge
    ? new StdioClientTransport({
        command: plan.bridge.command,
        args: plan.bridge.args,
        cwd: plan.bridge.cwd,
        env: { ...process.env },
        stderr: 'pipe'
      })
    : new StreamableHTTPClientTransport(new URL(plan.url));
  if (plan.bridge) {
    summary.stderr = '';
    transport.stderr?.on('data', (chunk) => {
      summary.stderr += chunk.toString();
    });
  }
  // Each notification as the transport delivers it, from the first message on.
  const start = transport.start.bind(transport);
  transport.start = async () => {
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (message.method !== undefined && message.id === undefined) {
        summary.delivered.push({ method: message.method, params: message.params ?? null });
      }
      deliver?.(message, extra);
    };
    return start();
  };
  const client = new Client(
    { name: 'Visual Studio Code', version: '1.140.0' },
    { capabilities: { roots: { listChanged: true }, elicitation: { form: {} } } }
  );
  client.setRequestHandler(ListRootsRequestSchema, async (request) => {
    summary.requests.push(request.method);
    return { roots: [{ uri: 'file:///workspace', name: 'workspace' }] };
  });
  const note = async (notification) => {
    summary.handled.push({ method: notification.method, params: notification.params ?? null });
  };
  for (const schema of [
    LoggingMessageNotificationSchema,
    ResourceUpdatedNotificationSchema,
    ResourceListChangedNotificationSchema,
    ToolListChangedNotificationSchema
  ]) {
    client.setNotificationHandler(schema, note);
  }
  client.fallbackNotificationHandler = note;

  await client.connect(transport, { timeout: TIMEOUT_MS });
  const options = { timeout: TIMEOUT_MS };
  await client.listTools({}, options);
  await client.listResources({}, options);
  await waitFor('roots', 'notifications/message', 'Roots updated');
  await client.subscribeResource({ uri: SUBSCRIBED }, options);
  await waitFor('subscribed', 'notifications/message', 'Received Subscribe Resource request');
  await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }, CallToolResultSchema, options);
  await waitFor('updated', 'notifications/resources/updated', SUBSCRIBED);
  await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }, CallToolResultSchema, options);
  await client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 0.2, steps: 4 } },
    CallToolResultSchema,
    { ...options, onprogress: (p) => summary.progress.push(p) }
  );
  await client.callTool(
    { name: 'gzip-file-as-resource', arguments: { name: 'hello.gz', data: 'data:text/plain;base64,aGVsbG8=' } },
    CallToolResultSchema,
    options
  );
  await waitFor('resources_changed', 'notifications/resources/list_changed');
  summary.sessionId = plan.bridge ? null : transport.sessionId ?? null;

  if (plan.bridge) {
    // The end of stdin ends the bridge: how it exits, within plan.exitMs.
    const stderr = transport.stderr;
    const stderrEnded = new Promise((resolve) => {
      if (!stderr || stderr.readableEnded || stderr.destroyed) resolve(true);
      else stderr.once('close', () => resolve(true));
    });
    summary.exit = await closeAndAwaitExit(client, transport._process, EXIT_MS);
    // The last lines of the bridge (the counts of its drops) come with the end of its stderr.
    let timer;
    summary.stderrEnded = await Promise.race([
      stderrEnded,
      new Promise((resolve) => {
        timer = setTimeout(() => resolve(false), EXIT_MS);
      })
    ]);
    clearTimeout(timer);
  } else {
    await transport.terminateSession();
    await client.close();
    summary.exit = { code: 0, signal: null };
  }
  summary.ok = true;
}

runClient(summary, WHOLE_RUN_MS, main);
