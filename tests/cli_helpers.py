"""Running t2t-lite's commands as a user does (a fresh interpreter each), for tests of what they print."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

# TensorFlow's C++ start-up lines would drown the one line the tests look for.
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def program_name(tool: str) -> str:
    """The console script of t2t_lite.bin.<tool>, as run_main prefixes its errors: trainer -> t2t-lite-trainer."""
    return "t2t-lite-" + tool.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Result:
    tool: str
    returncode: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        """The stderr lines run_main writes for a UserError: '<program>: error: ...'."""
        prefix = f"{program_name(self.tool)}: error: "
        return [line for line in self.stderr.splitlines() if line.startswith(prefix)]

    @property
    def error(self) -> str:
        """The message of the only error line (without the '<program>: error: ' prefix); fails otherwise."""
        assert len(self.error_lines) == 1, f"expected one error line, got:\n{self.stderr[-3000:]}"
        return self.error_lines[0].split(": error: ", 1)[1]


def run_tool(tool: str, *flags: str, env: dict | None = None, timeout: float = 300) -> Result:
    """Runs `python -m t2t_lite.bin.<tool> <flags>` to completion.

    Args:
      tool: the module in t2t_lite.bin, e.g. "trainer", "avg_checkpoints".
      flags: its command-line arguments.
      env: extra environment variables (on top of ENV).
    """
    done = subprocess.run([sys.executable, "-m", f"t2t_lite.bin.{tool}", *map(str, flags)], capture_output=True,
                          text=True, timeout=timeout, env={**ENV, **(env or {})}, check=False)
    return Result(tool, done.returncode, done.stdout, done.stderr)


def run_tools(commands: dict[str, tuple], max_running: int = 3) -> dict[str, Result]:
    """Runs many commands, at most max_running at a time (each pays TensorFlow's start-up, mostly CPU).

    Args:
      commands: name -> (tool, flags) or (tool, flags, env), as for run_tool.
    Returns:
      name -> its Result.
    """
    with concurrent.futures.ThreadPoolExecutor(max_running) as pool:
        futures = {name: pool.submit(run_tool, command[0], *command[1],
                                     env=command[2] if len(command) > 2 else None)
                   for name, command in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def snapshot(directory: Path) -> dict[str, tuple[int, int]] | None:
    """Every file and directory under directory (relative path -> (size, mtime_ns)); None when it does not exist.

    Equal snapshots before and after a refused command mean it created, wrote, changed and removed nothing there.
    """
    if not directory.exists():
        return None
    # The directory's own mtime changes when an entry is created or removed in it, even one removed again.
    return {str(path.relative_to(directory)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in [directory, *sorted(directory.rglob("*"))]}
