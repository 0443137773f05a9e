// The TypeScript SDK client (2025-11-25, the client VS Code resembles) in front of the bridge,
// which stands in front of a 2025-era upstream server. It spawns the bridge over stdio, answers
// the requests that the server sends through the bridge (elicitation, roots), carries out a plan
// and prints what it saw as one JSON object on stdout. The test that runs it makes the assertions.
//
// Usage: node legacy_upstream_client.mjs '<plan as JSON>'
//
// The plan:
//   {"command": "...", "args": [...], "cwd": "...", "timeoutMs": 20000, "exitMs": 10000,
//    "steps": [{"id": "...", "kind": "call" | "cancel" | "wait", "name": "...", "arguments": {...},
//               "progress": true, "method": "...", "ms": 10000}, ...]}
// "call" calls a tool (with a progress callback when "progress" is true); "cancel" calls a tool and
// aborts the call at its first progress notification; "wait" waits (at most "ms") for a notification
// of "method" to have arrived.
//
// The summary:
//   {"ok": true, "protocolVersion", "serverInfo", "instructions", "tools": [...names],
//    "steps": {"<id>": {"text", "isError", "progress", "error"}}, "requests": [{"method", "params"}],
//    "notifications": [{"method", "params"}], "progressFrames": [...params],
//    "exit": {"code", "signal"} or {"error"}}

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema
} from '@modelcontextprotocol/sdk/types.js';
import { closeAndAwaitExit, runClient } from './exit.mjs';

const WHOLE_RUN_MS = 100000;

const plan = JSON.parse(process.argv[2]);
const TIMEOUT_MS = plan.timeoutMs ?? 20000;
const EXIT_MS = plan.exitMs ?? 10000;
const summary = { ok: false, steps: {}, requests: [], notifications: [] };

async function main() {
  const transport = new StdioClientTransport({
    command: plan.command,
    args: plan.args,
    cwd: plan.cwd,
    env: { ...process.env },
    stderr: 'pipe'
  });
  transport.stderr?.on('data', () => {});
  const client = new Client(
    { name: 'Visual Studio Code', version: '1.140.0' },
    { capabilities: { roots: { listChanged: true }, elicitation: { form: {} } } }
  );
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    summary.requests.push({ method: request.method, params: request.params });
    return { action: 'accept', content: { name: 'Ada' } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async (request) => {
    summary.requests.push({ method: request.method, params: request.params ?? null });
    return { roots: [{ uri: 'file:///workspace', name: 'workspace' }] };
  });
  const note = (notification) => {
    summary.notifications.push({ method: notification.method, params: notification.params ?? null });
  };
  client.setNotificationHandler(ToolListChangedNotificationSchema, async (n) => note(n));
  client.setNotificationHandler(LoggingMessageNotificationSchema, async (n) => note(n));
  client.fallbackNotificationHandler = async (n) => note(n);

  // The SDK tells the negotiated version to a transport that wants it.
  transport.setProtocolVersion = (version) => {
    summary.protocolVersion = version;
  };
  await client.connect(transport, { timeout: TIMEOUT_MS });
  // The SDK runs notification handlers a tick late and drops a progress notification that
  // shares a read with the response: keep the progress frames themselves too.
  summary.progressFrames = [];
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message.method === 'notifications/progress') summary.progressFrames.push(message.params);
    deliver?.(message, extra);
  };
  const child = transport._process;
  summary.serverInfo = client.getServerVersion() ?? null;
  summary.instructions = client.getInstructions() ?? null;
  summary.tools = (await client.listTools({}, { timeout: TIMEOUT_MS })).tools.map((t) => t.name);

  for (const step of plan.steps) {
    const record = {};
    summary.steps[step.id] = record;
    try {
      if (step.kind === 'call' || step.kind === 'cancel') {
        const progress = [];
        const controller = new AbortController();
        const options = { timeout: TIMEOUT_MS, signal: controller.signal };
        if (step.progress || step.kind === 'cancel') {
          options.onprogress = (p) => {
            progress.push(p);
            if (step.kind === 'cancel') controller.abort('the user stopped it');
          };
        }
        const result = await client.callTool(
          { name: step.name, arguments: step.arguments ?? {} },
          CallToolResultSchema,
          options
        );
        record.isError = result.isError ?? false;
        record.text = result.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
        record.progress = progress;
      } else if (step.kind === 'wait') {
        const seen = () => summary.notifications.some((n) => n.method === step.method);
        const deadline = Date.now() + (step.ms ?? 10000);
        while (!seen() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        record.seen = seen();
      } else {
        throw new Error(`unknown step kind ${step.kind}`);
      }
    } catch (error) {
      record.error = { code: error.code ?? null, message: String(error.message ?? error) };
    }
  }

  // The end of stdin ends the bridge: how it exits, within plan.exitMs.
  summary.exit = await closeAndAwaitExit(client, child, EXIT_MS);
  summary.ok = true;
}

runClient(summary, WHOLE_RUN_MS, main);
