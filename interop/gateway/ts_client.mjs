// ts_client: drive an MCP server (here `toolwire gateway`) with the TypeScript SDK's client and
// check what a plan file asks (the plan of python_client.py; see its docstring).
//
//   node ts_client.mjs --sdk 1|2 --plan PLAN.json (--http URL | --stdio "CMD ARGS...")
//     --sdk 1   @modelcontextprotocol/sdk 1.x, which speaks 2025-11-25 (initialize)
//     --sdk 2   @modelcontextprotocol/client 2.x, versionNegotiation "auto": server/discover
//               first, 2026-07-28 when the server answers it
//     --timeout SECONDS  the most one step may take (default 20)
//
// scripts/gateway-interop copies this file beside the node_modules it installs (ESM resolves
// packages from the importing file's folder). Each step prints "PASS <step>: ..." or
// "FAIL <step>: ..."; the last line is "ts_client: N passed, M failed"; the exit status is 1 on
// any failure, 2 on a usage error. A stdio server gets our whole environment.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const usage = (why) => {
  console.error(`ts_client: ${why}\nusage: node ts_client.mjs --sdk 1|2 --plan PLAN (--http URL | --stdio CMD)`);
  process.exit(2);
};

let options;
try {
  ({ values: options } = parseArgs({
    options: {
      sdk: { type: 'string' },
      plan: { type: 'string' },
      http: { type: 'string' },
      stdio: { type: 'string' },
      timeout: { type: 'string', default: '20' },
    },
  }));
} catch (error) {
  usage(error.message);
}
if (!['1', '2'].includes(options.sdk)) usage('--sdk must be 1 or 2');
if (!options.plan) usage('--plan is needed');
if (!options.http === !options.stdio) usage('give one of --http and --stdio');
const timeoutMs = Number(options.timeout) * 1000;
const plan = JSON.parse(readFileSync(options.plan, 'utf8'));

// The two SDKs' entry points: v1 is one package with deep imports, v2 a client package.
async function sdk(version) {
  if (version === '1') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const { ToolListChangedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
    const pkg = JSON.parse(readFileSync(new URL('node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'));
    return {
      Client,
      StreamableHTTPClientTransport,
      StdioClientTransport,
      name: `@modelcontextprotocol/sdk ${pkg.version}`,
      clientOptions: {},
      // v1: callTool(params, resultSchema, options)
      callTool: (client, params, options) => client.callTool(params, undefined, options),
      listTools: (client, params) => client.listTools(params),
      // v1 speaks 2025-11-25 only: list changes come as notifications on the session.
      onListChanged: (client, handler) => client.setNotificationHandler(ToolListChangedNotificationSchema, handler),
      listen: async () => ({ close: async () => {} }),
    };
  }
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  const pkg = JSON.parse(readFileSync(new URL('node_modules/@modelcontextprotocol/client/package.json', import.meta.url), 'utf8'));
  return {
    Client,
    StreamableHTTPClientTransport,
    StdioClientTransport,
    name: `@modelcontextprotocol/client ${pkg.version}`,
    clientOptions: { versionNegotiation: { mode: 'auto' } },
    // v2: callTool(params, options)
    callTool: (client, params, options) => client.callTool(params, options),
    // v2 keeps lists for their ttlMs; the steps must see what the server lists now.
    listTools: (client, params) => client.listTools(params, { cacheMode: 'refresh' }),
    onListChanged: (client, handler) => client.setNotificationHandler('notifications/tools/list_changed', handler),
    // On 2026-07-28 list changes come only on a subscriptions/listen stream; on a 2025-11-25
    // connection, on the session, as in v1.
    listen: async (client) =>
      client.getProtocolEra?.() === 'legacy' ? { close: async () => {} } : client.listen({ toolsListChanged: true }),
  };
}

class StepFailed extends Error {}
const check = (condition, message) => {
  if (!condition) throw new StepFailed(message);
};

let passed = 0;
let failed = 0;
function report(ok, name, detail, started) {
  const took = ((performance.now() - started) / 1000).toFixed(2);
  console.log(`${ok ? 'PASS' : 'FAIL'} ${name}: ${detail} (${took}s)`);
  if (ok) passed += 1;
  else failed += 1;
}

async function step(name, body) {
  const started = performance.now();
  let timer;
  try {
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new StepFailed(`no answer within ${timeoutMs / 1000}s`)), timeoutMs);
    });
    report(true, name, await Promise.race([body(), timeout]), started);
  } catch (error) {
    report(false, name, error instanceof StepFailed ? error.message : `${error?.name}: ${error?.message}`, started);
  } finally {
    clearTimeout(timer);
  }
}

const textOf = (result) =>
  (result.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join('');

function checkResult(call, result) {
  const text = textOf(result);
  check(!result.isError, `isError: ${JSON.stringify(text.slice(0, 500))}`);
  for (const want of call.contains ?? []) {
    check(text.includes(want), `the text does not contain ${JSON.stringify(want)}: ${JSON.stringify(text.slice(0, 500))}`);
  }
  for (const [key, want] of Object.entries(call.structured ?? {})) {
    const got = result.structuredContent?.[key];
    check(JSON.stringify(got) === JSON.stringify(want), `structuredContent.${key} is ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
  const shown = text.split(/\s+/).join(' ').trim();
  return JSON.stringify(shown.length > 80 ? `${shown.slice(0, 80)}...` : shown);
}

async function listAll(api, client) {
  const tools = [];
  let cursor;
  for (let page = 0; page < 100; page += 1) {
    const result = await api.listTools(client, cursor ? { cursor } : undefined);
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) return tools;
  }
  throw new StepFailed('tools/list: more than 100 pages');
}

async function main() {
  const api = await sdk(options.sdk);
  const { Client, StreamableHTTPClientTransport, StdioClientTransport, name, clientOptions, callTool } = api;
  const target = options.stdio ? `stdio ${JSON.stringify(options.stdio)}` : `http ${options.http}`;
  console.log(`ts_client: ${name} against ${target}`);
  const started = performance.now();
  let transport;
  if (options.stdio) {
    const [command, ...args] = options.stdio.split(/\s+/).filter(Boolean);
    transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(options.http));
  }
  const client = new Client({ name: 'toolwire-gateway-interop', version: '1.0.0' }, clientOptions);
  // The SDK runs a notification's handler a microtask after reading it but settles a response at
  // once, so a progress notification read in the same chunk as its call's response (on stdio,
  // where the server writes both at once) finds the call gone, and the SDK reports it here:
  // counted, as it did reach the client in order.
  let lateProgress = 0;
  client.onerror = (error) => {
    if (/progress notification for an unknown token/.test(error?.message)) lateProgress += 1;
    else console.error(`ts_client: the client reports: ${error?.message}`);
  };
  let connected = false;
  await step('connect', async () => {
    await client.connect(transport, { timeout: timeoutMs });
    connected = true;
    const info = client.getServerVersion();
    const era = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? 'unknown';
    if (era !== 'unknown') check(era === plan.era, `negotiated ${era}, want ${plan.era}`);
    return `${info?.name} ${info?.version}, protocol ${era}`;
  });
  if (connected) {
    await step('tools/list', async () => {
      const tools = await listAll(api, client);
      const names = tools.map((t) => t.name);
      const missing = plan.tools.filter((n) => !names.includes(n));
      check(missing.length === 0, `missing ${JSON.stringify(missing)} in ${JSON.stringify(names)}`);
      const listed = (plan.absent ?? []).filter((n) => names.includes(n));
      check(listed.length === 0, `listed, and must not be: ${JSON.stringify(listed)}`);
      const bad = tools.filter((t) => t.inputSchema?.type !== 'object').map((t) => t.name);
      check(bad.length === 0, `an inputSchema that is not an object schema: ${bad}`);
      return `${names.length} tools, ${plan.tools.length} wanted all there`;
    });
    for (const call of plan.calls) {
      await step(`call ${call.name}`, async () =>
        checkResult(call, await callTool(client, { name: call.name, arguments: call.arguments }, { timeout: timeoutMs })),
      );
    }
    for (const call of plan.progress ?? []) {
      await step(`progress ${call.name}`, async () => {
        const seen = [];
        const lateBefore = lateProgress;
        const result = await callTool(client, { name: call.name, arguments: call.arguments }, {
          timeout: timeoutMs,
          onprogress: (p) => seen.push(p.progress),
        });
        const said = checkResult(call, result);
        const late = lateProgress - lateBefore;
        const got = late ? `${seen.length} progress notifications [${seen}] and ${late} read with the result` : `${seen.length} progress notifications [${seen}]`;
        check(seen.length + late >= call.at_least, `${got}, want at least ${call.at_least}`);
        check(seen.every((v, i) => i === 0 || seen[i - 1] <= v), `progress went backwards: ${seen}`);
        return `${got}, then ${said}`;
      });
    }
  }
  if (connected && plan.list_changed) {
    const { toggle, tool } = plan.list_changed;
    let changed = () => {};
    api.onListChanged(client, () => changed());
    const subscription = await api.listen(client);
    const toggled = async () => {
      const listed = async () => (await listAll(api, client)).map((t) => t.name).includes(tool);
      const had = await listed();
      const told = new Promise((resolve) => {
        changed = resolve;
      });
      await callTool(client, { name: toggle.name, arguments: toggle.arguments }, { timeout: timeoutMs });
      const waited = performance.now();
      await told;
      const has = await listed();
      check(has !== had, `${tool} listed before and after ${toggle.name}: ${had}`);
      return `${tool} ${has ? 'added' : 'removed'}, told ${((performance.now() - waited) / 1000).toFixed(2)}s after the call`;
    };
    // Twice, so that the upstream ends as it started.
    await step(`list_changed ${toggle.name}`, toggled);
    await step(`list_changed ${toggle.name} again`, toggled);
    await subscription.close();
  }
  await step('close', async () => {
    await client.close();
    return 'closed';
  });
  console.log(`ts_client: ${passed} passed, ${failed} failed (${((performance.now() - started) / 1000).toFixed(2)}s)`);
  process.exit(failed ? 1 : 0);
}

main().catch((error) => {
  console.log(`FAIL run: ${error?.stack ?? error}`);
  console.log(`ts_client: ${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
