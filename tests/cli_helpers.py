"""Running t2t-lite's commands as a user does, for tests of what they print.

Each command runs as `python -m t2t_lite.bin.<tool>` would, in a process of its own: its flags, environment,
stdout, stderr and exit code are its own. The process is forked from one that has already imported
TensorFlow and Keras (a multiprocessing fork server, started once per test worker), so a command skips
their ~5 s of start-up CPU; what they print while importing is what tests/test_quiet_start.py checks, in
fresh interpreters.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import dataclasses
import fcntl
import json
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
    umask = _current_umask()
    with tempfile.TemporaryDirectory(prefix="t2t-lite-forked-") as directory:
        stdout, stderr = os.path.join(directory, "stdout"), os.path.join(directory, "stderr")
        exit_code = os.path.join(directory, "exit_code")
        process = _preloaded().Process(target=_in_child, args=({**ENV, **(env or {})}, umask, stdout, stderr,
                                                               exit_code, function, args, False))
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


def _current_umask() -> int:
    """The process's umask, for a forked child to take."""
    with _UMASK_LOCK:  # reading the umask means setting it: run_tools' threads must not interleave here
        umask = os.umask(0)
        os.umask(umask)
    return umask


def _preloaded():
    """The multiprocessing context whose fork server has imported TensorFlow and Keras (made on first use)."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["tensorflow", "keras"])
    return _CONTEXT


def _in_child(env: dict, umask: int, stdout: str, stderr: str, exit_code: str, function, args,
              started: bool) -> None:
    """In the forked process: the caller's environment and umask (the fork server has those of when it
    started), stdout and stderr to files (or a FIFO), then function(*args) and the exit code an interpreter
    would give. started (start_forked): each line written as it ends, as PYTHONUNBUFFERED=1 gives a fresh
    interpreter, and at the end the atexit handlers run as at an interpreter's exit (TensorFlow's autograph
    removes its temporary files in one)."""
    os.environ.clear()
    os.environ.update(env)
    os.umask(umask)
    for fd, path in ((1, stdout), (2, stderr)):
        file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(file, fd)
        os.close(file)
    sys.stdin = open(os.devnull)
    if started:  # the fork server's streams were made for files: block-buffered
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
    tempfile.tempdir = None  # as in a fresh interpreter, TMPDIR (from env) decides, not what the server cached
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
    if started:
        atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    with open(exit_code, "w", encoding="utf-8") as f:
        f.write(str(code))
    os._exit(code)


def _run_module(tool: str, flags: list[str]) -> None:
    """What `python -m t2t_lite.bin.<tool> <flags>` runs."""
    sys.argv = [f"t2t_lite.bin.{tool}", *flags]  # runpy puts the module's path in argv[0], as -m does
    runpy.run_module(f"t2t_lite.bin.{tool}", run_name="__main__", alter_sys=True)


class Started:
    """A command start_tool started and left running: read its lines as it writes them, signal it, wait for it."""

    def __init__(self, tool: str, process, directory: tempfile.TemporaryDirectory, stream, stdout: str | None):
        self.tool, self.pid = tool, process.pid
        self._process, self._directory, self.stream, self._stdout = process, directory, stream, stdout
        self.returncode = None

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float = 300) -> Result:
        """Waits for the command to exit; its Result with what stream had left unread (returncode as
        subprocess's: the negative signal number if a signal ended it)."""
        rest = self.stream.read()  # to the end: EOF once the command and all it started have exited
        self.stream.close()
        self._process.join(timeout)
        if self._process.exitcode is None:
            self._process.kill()
            self._process.join()
            raise TimeoutError(f"{self.tool} ran over {timeout} s")
        self.returncode = _exit_code(os.path.join(self._directory.name, "exit_code"), self._process.exitcode)
        stdout = rest
        if self._stdout is not None:
            with open(self._stdout, encoding="utf-8") as f:
                stdout = f.read()
        self._directory.cleanup()
        return Result(self.tool, self.returncode, stdout, rest if self._stdout is not None else "")


def print_json(function, *args) -> None:
    """Prints function(*args) as one line of JSON: run_forked(print_json, f, ...) and start_forked give a test
    what a function returned in a process of its own."""
    print(json.dumps(function(*args)))


def start_tool(tool: str, *flags: str, env: dict | None = None, stdout_too: bool = True,
               pipe_bytes: int | None = None) -> Started:
    """Starts `python -m t2t_lite.bin.<tool> <flags>` (forked as run_tool does) and returns at once; see
    start_forked."""
    return start_forked(_run_module, tool, [str(f) for f in flags], env=env, stdout_too=stdout_too,
                        pipe_bytes=pipe_bytes, name=tool)


def start_forked(function, *args, env: dict | None = None, stdout_too: bool = True, pipe_bytes: int | None = None,
                 name: str | None = None) -> Started:
    """Starts function(*args) in a process forked as run_forked does (function: module-level, importable by
    name) and returns at once.

    Its stderr (and stdout too, unless stdout_too=False: then into a file) goes into a pipe (a FIFO) that
    Started.stream reads line by line as the command writes them (line-buffered, as with PYTHONUNBUFFERED=1);
    pipe_bytes sets the pipe's size (F_SETPIPE_SZ), so a command that writes faster than the test reads blocks
    that far ahead. For tests that act on a running command: kill it at a given line, signal it.
    """
    umask = _current_umask()
    directory = tempfile.TemporaryDirectory(prefix="t2t-lite-started-")
    fifo = os.path.join(directory.name, "stream")
    os.mkfifo(fifo)
    stdout = None if stdout_too else os.path.join(directory.name, "stdout")
    process = _preloaded().Process(target=_in_child, args=(
        {**ENV, **(env or {})}, umask, stdout or fifo, fifo, os.path.join(directory.name, "exit_code"),
        function, args, True))
    process.start()
    stream = open(fifo, encoding="utf-8")  # returns once the command has opened it (at once, when it starts)
    if pipe_bytes is not None:
        fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), pipe_bytes)
    return Started(name or function.__name__, process, directory, stream, stdout)


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
