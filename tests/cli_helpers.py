"""Running t2t-lite's commands as a user does, for tests of what they print.

Each command runs as `python -m t2t_lite.bin.<tool>` would, in a process of its own: its flags, environment,
stdout, stderr and exit code are its own. The process is forked from one that has already imported
TensorFlow and Keras (a multiprocessing fork server, started once per test worker), so a command skips
their ~5 s of start-up CPU; what they print while importing is what tests/test_quiet_start.py checks, in
fresh interpreters.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import runpy
import sys
import tempfile
import threading
import traceback
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
    """Runs `python -m t2t_lite.bin.<tool> <flags>` to completion (in a process forked with TensorFlow loaded).

    Args:
      tool: the module in t2t_lite.bin, e.g. "trainer", "avg_checkpoints".
      flags: its command-line arguments.
      env: extra environment variables (on top of ENV).
    """
    code, stdout, stderr = run_forked(_run_module, tool, [str(f) for f in flags], env=env, timeout=timeout)
    return Result(tool, code, stdout, stderr)


def run_forked(function, *args, env: dict | None = None, timeout: float = 300) -> tuple[int, str, str]:
    """function(*args) in a process of its own, forked with TensorFlow and Keras already imported.

    For what needs a process to itself (absl's flags, TensorFlow's devices are fixed per process). function
    must be importable by name (a module-level function). The process gets the caller's environment (ENV plus
    env), umask and working directory.

    Returns:
      (exit code: 0, the code of a SystemExit, or 1 after an exception's traceback; stdout; stderr).
    """
    with _UMASK_LOCK:  # reading the umask means setting it: run_tools' threads must not interleave here
        umask = os.umask(0)
        os.umask(umask)
    with tempfile.TemporaryDirectory(prefix="t2t-lite-forked-") as directory:
        stdout, stderr = os.path.join(directory, "stdout"), os.path.join(directory, "stderr")
        exit_code = os.path.join(directory, "exit_code")
        process = _preloaded().Process(target=_in_child, args=({**ENV, **(env or {})}, umask, stdout, stderr,
                                                               exit_code, function, args))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise TimeoutError(f"{function.__name__}{args} ran over {timeout} s")
        with open(stdout, encoding="utf-8") as out, open(stderr, encoding="utf-8") as err:
            return _exit_code(exit_code, process.exitcode), out.read(), err.read()


def _exit_code(path: str, reported: int) -> int:
    """The code the child wrote before exiting; what the fork server reported if it wrote none (a signal).

    Under load the fork server can fail to report a child's status, and multiprocessing then gives 255
    (python/cpython#140867); it happened once in a suite run, to a child that had exited with 2.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return int(f.read())
    except (OSError, ValueError):
        return reported


_CONTEXT = None
_UMASK_LOCK = threading.Lock()


def _preloaded():
    """The multiprocessing context whose fork server has imported TensorFlow and Keras (made on first use)."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["tensorflow", "keras"])
    return _CONTEXT


def _in_child(env: dict, umask: int, stdout: str, stderr: str, exit_code: str, function, args) -> None:
    """In the forked process: the caller's environment and umask (the fork server has those of when it
    started), stdout and stderr to files, then function(*args) and the exit code an interpreter would give."""
    os.environ.clear()
    os.environ.update(env)
    os.umask(umask)
    for fd, path in ((1, stdout), (2, stderr)):
        file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(file, fd)
        os.close(file)
    sys.stdin = open(os.devnull)
    code = 0
    try:
        function(*args)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, (int, type(None))):
            print(exit_.code, file=sys.stderr)
    except BaseException:  # an uncaught exception: the traceback and exit code 1, as the interpreter gives
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    with open(exit_code, "w", encoding="utf-8") as f:
        f.write(str(code))
    os._exit(code)


def _run_module(tool: str, flags: list[str]) -> None:
    """What `python -m t2t_lite.bin.<tool> <flags>` runs."""
    sys.argv = [f"t2t_lite.bin.{tool}", *flags]  # runpy puts the module's path in argv[0], as -m does
    runpy.run_module(f"t2t_lite.bin.{tool}", run_name="__main__", alter_sys=True)


def run_tools(commands: dict[str, tuple], max_running: int = 3) -> dict[str, Result]:
    """Runs many commands, at most max_running at a time.

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
