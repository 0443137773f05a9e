"""Play a short VS Code session against the bridge and show every exchange.

``make demo`` runs this: it starts ``mcp-bridge-vscode -- python -m mcpbridge.demo``
the way VS Code would, speaks MCP 2025-11-25 to it like VS Code, and prints each
frame it sends (``>>``) and each frame the bridge writes (``<<``). The bridge's
own stderr lines are shown as they come (``!!``).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import Any

WAIT = 15.0


class Session:
    def __init__(self) -> None:
        command = [sys.executable, "-m", "mcpbridge", "--", sys.executable, "-m", "mcpbridge.demo"]
        print("$ mcp-bridge-vscode -- python -m mcpbridge.demo\n")
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, name="demo-stdout", daemon=True).start()
        threading.Thread(target=self._errors, name="demo-stderr", daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.frames.put(json.loads(line))
        self.frames.put(None)

    def _errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            print("!! " + line.decode("utf-8", "replace").rstrip())

    def send(self, frame: dict[str, Any]) -> None:
        print(">> " + _short(frame))
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], *, answer: Any = None) -> dict[str, Any]:
        self.next_id += 1
        request_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.until(request_id, answer=answer)

    def until(self, request_id: int, *, answer: Any = None) -> dict[str, Any]:
        while True:
            frame = self.frames.get(timeout=WAIT)
            if frame is None:
                raise SystemExit("the bridge stopped")
            print("<< " + _short(frame))
            if "method" in frame and "id" in frame and answer is not None:
                self.send({"jsonrpc": "2.0", "id": frame["id"], "result": answer})
            elif frame.get("id") == request_id and "method" not in frame:
                return frame


def _short(frame: dict[str, Any]) -> str:
    text = json.dumps(frame)
    return text if len(text) <= 160 else text[:157] + "..."


def main() -> None:
    session = Session()
    print("\n# VS Code initializes the connection; the bridge asks the upstream with server/discover.")
    session.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
        },
    )
    session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    print("\n# VS Code lists the tools.")
    session.request("tools/list", {})
    print("\n# A slow tool reports progress under VS Code's progress token.")
    session.request(
        "tools/call",
        {"name": "countdown", "arguments": {"seconds": 3}, "_meta": {"progressToken": "demo-1"}},
    )
    print("\n# A tool asks the user: the upstream's input_required round becomes elicitation/create.")
    session.request(
        "tools/call",
        {"name": "ask_name", "arguments": {}},
        answer={"action": "accept", "content": {"name": "Ada"}},
    )
    print("\n# VS Code cancels a call: the bridge cancels upstream and writes no response.")
    session.next_id += 1
    slow_id = session.next_id
    session.send(
        {
            "jsonrpc": "2.0",
            "id": slow_id,
            "method": "tools/call",
            "params": {"name": "countdown", "arguments": {"seconds": 30}},
        }
    )
    session.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": slow_id}})
    session.request("ping", {})
    print("\n# VS Code closes stdin; the bridge stops the upstream and exits 0.")
    assert session.proc.stdin is not None
    session.proc.stdin.close()
    code = session.proc.wait(timeout=WAIT)
    print(f"\nthe bridge exited with code {code}")
    sys.exit(code)


if __name__ == "__main__":
    main()
