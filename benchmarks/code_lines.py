"""Lines of code of the library and commands (t2t_lite/, bin/, problems/, hparams/), without blank lines,
comments and docstrings: the measure issue 55 asks not to grow.

  python benchmarks/code_lines.py [CHECKOUT]   # default: this checkout
  python benchmarks/code_lines.py --since REV  # the count at REV and at every commit after it, with each change
"""
import ast
import io
import pathlib
import subprocess
import sys
import tokenize


def code_lines(source: str) -> int:
    """The lines of `source` holding code: not blank, not only a comment, not in a docstring."""
    tree = ast.parse(source)
    doc_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                        tokenize.ENDMARKER):
            continue
        for line in range(tok.start[0], tok.end[0] + 1):
            if line not in doc_lines:
                lines.add(line)
    return len(lines)


DIRECTORIES = ("t2t_lite", "bin", "problems", "hparams")
REPO = pathlib.Path(__file__).resolve().parent.parent


def checkout_lines(root: pathlib.Path) -> int:
    return sum(code_lines(p.read_text(encoding="utf-8")) for d in DIRECTORIES for p in (root / d).rglob("*.py"))


def commit_lines(commit: str) -> int:
    """The count of a commit of this repository, read with git show (nothing is checked out)."""
    git = lambda *args: subprocess.check_output(["git", *args], text=True, cwd=REPO)
    files = [f for f in git("ls-tree", "-r", "--name-only", commit, "--", *DIRECTORIES).split() if f.endswith(".py")]
    return sum(code_lines(git("show", f"{commit}:{f}")) for f in files)


if len(sys.argv) == 3 and sys.argv[1] == "--since":
    commits = subprocess.check_output(["git", "rev-list", "--reverse", f"{sys.argv[2]}^..HEAD"], text=True,
                                      cwd=REPO).split()
    previous = None
    for commit in commits:
        total = commit_lines(commit)
        subject = subprocess.check_output(["git", "log", "-1", "--format=%s", commit], text=True, cwd=REPO).strip()
        change = "" if previous is None else f"{total - previous:+d}"
        print(f"{total:6d} {change:>5} {commit[:7]} {subject[:100]}", flush=True)
        previous = total
else:
    print(checkout_lines(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else REPO))
