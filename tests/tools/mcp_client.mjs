// SPDX-License-Identifier: Apache-2.0
// tests/tools/mcp_client.mjs — drives `fleetfs mcp` with the official MCP
// TypeScript SDK's client (@modelcontextprotocol/sdk from the npm registry,
// installed by the test next to a copy of this file), as an agent's host
// would: spawn the server on stdio, initialize, then list or call tools.
//
//   node mcp_client.mjs FLEETFS MOUNT tools
//       one JSON line: {protocol?, server, tools:[{name, description, inputSchema, annotations}]}
//   node mcp_client.mjs FLEETFS MOUNT call NAME ARGS_JSON [NAME ARGS_JSON]...
//       one JSON line per call: {isError, text, structured} (structured: the
//       result's structuredContent, when it has one)
//   node mcp_client.mjs FLEETFS MOUNT session
//       one long-lived server: each line of stdin "NAME ARGS_JSON" is one
//       call, answered by one line {isError, text, structured} (or {rpcError: {code,
//       message}} when the server answered with a JSON-RPC error, or the call
//       timed out: MCP_CALL_TIMEOUT_MS); ends at EOF
// Exit 0 when every request got an answer (tool errors included), else 1.
// With MCP_AS=<gid> in the environment the server is `fleetfs mcp MOUNT --as <gid>`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createInterface } from "node:readline";

const [fleetfs, mount, mode, ...rest] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: fleetfs,
  args: process.env.MCP_AS ? ["mcp", mount, "--as", process.env.MCP_AS] : ["mcp", mount],
  stderr: "inherit",
});
const client = new Client({ name: "fleetfs-test", version: "1.0.0" });
// MCP_CALL_TIMEOUT_MS: each session call's timeout; on it the SDK sends
// notifications/cancelled and the call ends with its RequestTimeout error
const callOptions = process.env.MCP_CALL_TIMEOUT_MS ? { timeout: Number(process.env.MCP_CALL_TIMEOUT_MS) } : undefined;

try {
  await client.connect(transport);
  if (mode === "tools") {
    const { tools } = await client.listTools();
    console.log(JSON.stringify({
      server: client.getServerVersion(),
      tools: tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema,
        annotations: t.annotations })),
    }));
  } else if (mode === "call") {
    for (let i = 0; i < rest.length; i += 2) {
      const res = await client.callTool({ name: rest[i], arguments: JSON.parse(rest[i + 1] ?? "{}") });
      const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
      console.log(JSON.stringify({ isError: res.isError === true, text, structured: res.structuredContent }));
    }
  } else if (mode === "session") {
    const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of rl) {
      const sp = line.indexOf(" ");
      const name = sp < 0 ? line : line.slice(0, sp);
      const args = sp < 0 ? {} : JSON.parse(line.slice(sp + 1));
      try {
        const res = await client.callTool({ name, arguments: args }, undefined, callOptions);
        const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
        console.log(JSON.stringify({ isError: res.isError === true, text, structured: res.structuredContent }));
      } catch (e) {
        console.log(JSON.stringify({ rpcError: { code: e.code ?? null, message: e.message ?? String(e) } }));
      }
    }
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  await client.close();
  process.exit(0);
} catch (e) {
  console.error(`mcp_client: ${e.message ?? e}`);
  process.exit(1);
}
