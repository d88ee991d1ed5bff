// Installed by `turnback init opencode`: saves what opencode's tools change,
// so `turnback rewind` can undo a turn. Each event runs `turnback hook
// opencode` with the event as JSON on standard input; a write whose current
// contents cannot be saved first is refused (the hook exits 2).
import { spawnSync } from "node:child_process";

const PROGRAM = __PROGRAM__;
const TOOLS = new Set(__TOOLS__);

export const TurnbackPlugin = async ({ directory }) => {
  // The user message that began each session's current turn.
  const messages = new Map();
  const send = (event) => {
    const r = spawnSync(PROGRAM, ["hook", "opencode"], {
      input: JSON.stringify({ cwd: directory, ...event }),
      encoding: "utf8",
      timeout: __TIMEOUT_MS__,
    });
    if (r.error) {
      process.stderr.write(`turnback: cannot run ${PROGRAM}: ${r.error.message}\n`);
    } else if (r.stderr) {
      process.stderr.write(r.stderr);
    }
    return r;
  };
  return {
    "chat.message": async (input, output) => {
      const id = input.messageID ?? output?.message?.id;
      if (id) messages.set(input.sessionID, id);
      const prompt = (output?.parts ?? [])
        .filter((p) => p.type === "text" && !p.synthetic)
        .map((p) => p.text)
        .join("\n");
      send({ hook_event_name: "chat.message", session_id: input.sessionID, message_id: id, prompt });
    },
    "tool.execute.before": async (input, output) => {
      if (!TOOLS.has(input.tool)) return;
      const r = send({
        hook_event_name: "tool.execute.before",
        session_id: input.sessionID,
        message_id: messages.get(input.sessionID),
        tool_name: input.tool,
        tool_input: output.args,
      });
      if (r.status === 2) throw new Error(r.stderr.trim());
    },
    "tool.execute.after": async (input) => {
      if (!TOOLS.has(input.tool)) return;
      send({
        hook_event_name: "tool.execute.after",
        session_id: input.sessionID,
        message_id: messages.get(input.sessionID),
        tool_name: input.tool,
        tool_input: input.args,
      });
    },
  };
};
