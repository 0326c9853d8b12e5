"""Every t2t-lite command the README and docs/ show uses flags the command has.

A command line in a page (a code block, or a `...` span in a table) is read from `t2t-lite-<tool>` to the end
of its command: a closing backtick, `|`, `&&`, `;`, a redirection, a line end without a `\\`, or words that
go on in prose ("and", "or", "then", ", "). Each `--flag` on it must be one of that tool's own flags (absl's,
read from the tool's module in a process of its own, since the tools define some flags alike), or `--noflag`
of a boolean one.
"""
import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Each console script (setup.py) and the module whose flags it parses.
TOOLS = {"trainer": "trainer", "datagen": "datagen", "decoder": "decoder", "scorer": "scorer", "bleu": "bleu",
         "avg-checkpoints": "avg_checkpoints", "ensemble": "ensemble", "visualize": "visualize",
         "exporter": "exporter", "query": "query"}
COMMAND = re.compile(r"t2t-lite-([a-z-]+)((?:\\\n|[^`|&;<>\n\\]|\\(?!\n))*)")
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*)")
PROSE = re.compile(r"\s(?:and|or|then)\s|,\s")  # where a sentence goes on after a command it quotes


def commands(text: str) -> list[tuple[str, int, list[str]]]:
    """(tool, line number, flags) of each t2t-lite command line in a page's text."""
    found = []
    for match in COMMAND.finditer(text):
        tool = match.group(1).rstrip("-")
        if tool in TOOLS:
            arguments = PROSE.split(match.group(2), maxsplit=1)[0]
            found.append((tool, text.count("\n", 0, match.start()) + 1, FLAG.findall(arguments)))
    return found


@pytest.fixture(scope="module")
def tool_flags() -> dict[str, set[str]]:
    """Each tool's flag names, absl's own (--helpshort, --flagfile, ...) included."""
    code = ("import json, sys\nfrom absl import app, flags\nimport importlib\n"
            "importlib.import_module('t2t_lite.bin.' + sys.argv[1])\n"
            "print(json.dumps([[name, flags.FLAGS[name].boolean] for name in flags.FLAGS]))\n")
    found = {}
    for tool, module in TOOLS.items():
        result = subprocess.run([sys.executable, "-c", code, module], capture_output=True, text=True, timeout=300,
                                cwd="/")
        assert result.returncode == 0, result.stderr[-2000:]
        pairs = json.loads(result.stdout.strip().splitlines()[-1])
        found[tool] = {name for name, _ in pairs} | {f"no{name}" for name, boolean in pairs if boolean}
    return found


def test_the_pages_show_commands():
    shown = [command for page in PAGES for command in commands(page.read_text(encoding="utf-8"))]
    assert len(shown) > 50 and {tool for tool, _, _ in shown} >= {"trainer", "datagen", "decoder", "exporter"}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_flag_a_page_gives_a_command_is_the_commands_own(page, tool_flags):
    unknown = [f"{page.name}:{line}: t2t-lite-{tool} --{flag}"
               for tool, line, flags in commands(page.read_text(encoding="utf-8"))
               for flag in flags if flag not in tool_flags[tool]]
    assert unknown == []


def test_the_check_finds_a_flag_a_command_does_not_have(tool_flags):
    text = "```\nt2t-lite-trainer --problem=x \\\n  --train_stepz=5 --output_dir=run\n```\n| `t2t-lite-decoder --nbest=2` |"
    found = commands(text)
    assert found == [("trainer", 2, ["problem", "train_stepz", "output_dir"]), ("decoder", 5, ["nbest"])]
    assert [flag for tool, _, flags in found for flag in flags if flag not in tool_flags[tool]] == ["train_stepz"]
