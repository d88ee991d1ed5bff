"""End-to-end test of `turnback mcp` with the official MCP Python SDK.

Starts the real server as a subprocess over stdio, lists its tools, writes,
edits, moves and deletes files over several turns, checks that paths outside
the project root are tool errors that write nothing, rewinds, and checks the
folder byte for byte. Usage: test_mcp_client.py PATH_TO_TURNBACK
"""

import json
import os
import stat
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

PASSED = 0
FAILED = 0


def check(cond, what):
    global PASSED, FAILED
    if cond:
        PASSED += 1
        print(f"ok   {what}")
    else:
        FAILED += 1
        print(f"FAIL {what}")


def tree(root: Path):
    """path -> (kind, mode, bytes) for everything but .turnback/."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".turnback")]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(p).encode())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), b"")
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), p.read_bytes())
    return out


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def turn_of(result):
    for line in text_of(result).splitlines():
        if line.startswith("turn: "):
            return line[len("turn: "):]
    return None


def server(binary, root, gap, data, home):
    # The SDK starts the server with a few variables of its own (HOME, PATH,
    # ...), not the test's: without these the server's store would be made
    # in the real user's data directory.
    return Client(
        StdioServerParameters(
            command=binary,
            args=["--root", str(root), "mcp", "--turn-gap", str(gap)],
            cwd="/",
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "TURNBACK_DATA_DIR": str(data),
            },
        )
    )


async def main(binary):
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as outside:
        root = Path(tmp) / "project"
        root.mkdir()
        data, home = Path(tmp) / "data", Path(tmp) / "home"
        home.mkdir()
        outside = Path(outside)
        (root / "README.md").write_text("# Project\n")
        (root / "a.txt").write_text("alpha\n")
        (root / ".env").write_text("SECRET=1\n")
        (root / "src").mkdir()
        (root / "src" / "app.py").write_text("def greet():\n    return 'hello'\n\nprint(greet())\n")
        (root / "run.sh").write_text("#!/bin/sh\necho run\n")
        (root / "run.sh").chmod(0o755)
        (root / "data.bin").write_bytes(bytes(range(256)))
        (root / "out").symlink_to(outside)
        before = tree(root)

        async with server(binary, root, 600, data, home) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            wanted = {"write_file", "edit_file", "create_directory", "move_file", "delete_file",
                      "list_turns", "show_turn", "diff_turn", "rewind", "undo"}
            check(wanted <= set(tools), f"tools listed: {sorted(tools)}")
            edit_props = tools["edit_file"].input_schema.get("properties", {})
            check({"path", "edits", "dryRun", "turn"} <= set(edit_props), "edit_file takes path, edits, dryRun, turn")
            check("turn" in tools["write_file"].description.lower(), "write_file's description states the turn rule")

            # Turn t1: write, create a directory, write in it, edit.
            r = await c.call_tool("write_file", {"path": "a.txt", "content": "alpha v2\n", "turn": "t1"})
            check(not r.is_error and turn_of(r) == "t1", f"write_file into t1: {text_of(r)!r}")
            r = await c.call_tool("create_directory", {"path": "docs/guide", "turn": "t1"})
            check(not r.is_error and (root / "docs" / "guide").is_dir(), "create_directory docs/guide")
            r = await c.call_tool("write_file", {"path": str(root / "docs/guide/intro.md"), "content": "Intro\n", "turn": "t1"})
            check(not r.is_error, "write_file with an absolute path inside the root")
            r = await c.call_tool("edit_file", {"path": "src/app.py", "turn": "t1",
                                                "edits": [{"oldText": "'hello'", "newText": "'hello, world'"}]})
            check(not r.is_error and "+    return 'hello, world'" in text_of(r), "edit_file returns the diff")
            after_t1 = tree(root)

            # Turn t2: a dry run, an edit, a move, a delete.
            r = await c.call_tool("edit_file", {"path": "src/app.py", "dryRun": True, "turn": "t2",
                                                "edits": [{"oldText": "print(greet())", "newText": "main()"}]})
            check(not r.is_error and "+main()" in text_of(r) and tree(root) == after_t1, "dry run shows the diff and writes nothing")
            r = await c.call_tool("edit_file", {"path": "src/app.py", "turn": "t2",
                                                "edits": [{"oldText": "print(greet())", "newText": "main()"}]})
            check(not r.is_error, "edit_file in t2")
            r = await c.call_tool("edit_file", {"path": "src/app.py", "turn": "t2",
                                                "edits": [{"oldText": "no such text", "newText": "x"}]})
            check(r.is_error and "not found" in text_of(r), "an edit whose oldText is missing is a tool error")
            r = await c.call_tool("move_file", {"source": "a.txt", "destination": "archive/a.txt", "turn": "t2"})
            check(not r.is_error and (root / "archive/a.txt").read_text() == "alpha v2\n", "move_file")
            r = await c.call_tool("delete_file", {"path": ".env", "turn": "t2"})
            check(not r.is_error and not (root / ".env").exists(), "delete_file")
            after_t2 = tree(root)

            # Paths outside the root: tool errors, nothing written anywhere.
            for args in [
                ("write_file", {"path": "../escape.txt", "content": "x", "turn": "t2"}),
                ("write_file", {"path": str(outside / "abs.txt"), "content": "x", "turn": "t2"}),
                ("write_file", {"path": "out/through-link.txt", "content": "x", "turn": "t2"}),
                ("write_file", {"path": ".turnback/log.jsonl", "content": "x", "turn": "t2"}),
                ("create_directory", {"path": "../escape-dir", "turn": "t2"}),
                ("move_file", {"source": "README.md", "destination": "../moved.md", "turn": "t2"}),
                ("delete_file", {"path": "../project/../x", "turn": "t2"}),
                ("edit_file", {"path": "/etc/hostname", "edits": [{"oldText": "a", "newText": "b"}], "turn": "t2"}),
            ]:
                r = await c.call_tool(*args)
                check(r.is_error, f"{args[0]} {args[1].get('path', args[1].get('destination'))} is a tool error: {text_of(r)[:80]!r}")
            check(list(outside.iterdir()) == [] and not (Path(tmp) / "escape.txt").exists()
                  and not (Path(tmp) / "moved.md").exists() and not (Path(tmp) / "escape-dir").exists(),
                  "nothing was written outside the root")
            check(tree(root) == after_t2, "refused calls changed nothing inside the root")

            # Without `turn`, calls less than the gap apart share one default turn.
            r1 = await c.call_tool("write_file", {"path": "notes/one.txt", "content": "1\n"})
            r2 = await c.call_tool("write_file", {"path": "notes/two.txt", "content": "2\n"})
            d1, d2 = turn_of(r1), turn_of(r2)
            check(d1 is not None and d1.startswith("mcp-") and d1 == d2, f"one default turn for a batch: {d1}, {d2}")

            r = await c.call_tool("list_turns", {})
            ids = [t["turn"] for t in json.loads(text_of(r))]
            check(ids == ["t1", "t2", d1], f"list_turns: {ids}")
            r = await c.call_tool("show_turn", {"turn": "t2"})
            shown = sorted(f["path"] for f in json.loads(text_of(r))["files"])
            check(shown == [".env", "a.txt", "archive", "archive/a.txt", "src/app.py"], f"show_turn t2: {shown}")
            r = await c.call_tool("diff_turn", {"turn": "t1"})
            diffs = {d["path"]: d["change"] for d in json.loads(text_of(r))}
            check(diffs.get("docs/guide/intro.md") == "created" and diffs.get("src/app.py") == "modified", f"diff_turn t1: {diffs}")

            r = await c.call_tool("rewind", {"turn": d1, "paths": ["notes/one.txt"]})
            rep = json.loads(text_of(r))
            check(not r.is_error and rep["paths"] == ["notes/one.txt"] and not (root / "notes/one.txt").exists()
                  and (root / "notes/two.txt").exists(), f"a rewind of one path of the default turn: {rep.get('paths')}")
            r = await c.call_tool("undo", {})
            check(not r.is_error and (root / "notes/one.txt").exists(), "undo of the path rewind")
            r = await c.call_tool("rewind", {"turn": d1, "dryRun": True})
            check(not r.is_error and json.loads(text_of(r))["dry_run"] and (root / "notes/one.txt").exists(), "rewind dry run changes nothing")
            r = await c.call_tool("rewind", {"turn": d1})
            check(not r.is_error and tree(root) == after_t2, "rewind of the default turn")
            r = await c.call_tool("write_file", {"path": "late.txt", "content": "late\n"})
            d3 = turn_of(r)
            check(d3 is not None and d3 != d1, f"a rewind ends the default turn: {d1} then {d3}")
            r = await c.call_tool("rewind", {"turn": "t2"})
            check(not r.is_error and tree(root) == after_t1, "rewind t2 (and the later turn) gives the folder after t1")
            r = await c.call_tool("rewind", {"turn": "t2"})
            check(r.is_error and "already rewound" in text_of(r), f"a second rewind is a tool error: {text_of(r)[:80]!r}")
            after_rewind = tree(root)
            r = await c.call_tool("undo", {})
            check(not r.is_error and tree(root) != after_rewind, "undo reverses the last rewind")
            r = await c.call_tool("rewind", {"turn": "t2"})
            check(not r.is_error and tree(root) == after_rewind, "the undone turns rewind again")

        # A server with gap 0: each call without `turn` is a turn of its own.
        async with server(binary, root, 0, data, home) as c:
            r1 = await c.call_tool("write_file", {"path": "x.txt", "content": "x\n"})
            r2 = await c.call_tool("write_file", {"path": "y.txt", "content": "y\n"})
            e1, e2 = turn_of(r1), turn_of(r2)
            check(e1 and e2 and e1 != e2 and e1 not in (d1, d3), f"gap 0: separate turns {e1}, {e2}, ids never reused")
            r = await c.call_tool("rewind", {"turn": "t1"})
            check(not r.is_error, "rewind t1 and everything after it")

        check(tree(root) == before, "the folder is back byte for byte")
        stores = list((data / "stores").iterdir()) if (data / "stores").is_dir() else []
        check(len(stores) == 1, f"the server's store is in the test's data directory: {stores}")

    print(f"mcp: {PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: test_mcp_client.py PATH_TO_TURNBACK")
    sys.exit(anyio.run(main, sys.argv[1]))
