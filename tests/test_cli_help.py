"""--helpshort of the installed commands lists their own flags (absl looks for them under the script's name)."""
import shutil
import subprocess

import pytest

# A command, and flags its --helpshort must list: one of its own, one shared from another module.
COMMANDS = {
    "t2t-lite-decoder": ("--nbest", "--checkpoint_path"),
    "t2t-lite-scorer": ("--target_file", "--output_dir"),
    "t2t-lite-trainer": ("--warm_start_from", "--data_dir"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_helpshort_of_the_installed_command_lists_its_flags_under_its_docstring(command):
    path = shutil.which(command)
    if path is None:
        pytest.skip(f"{command} is not installed on PATH; pip install -e . first")
    result = subprocess.run([path, "--helpshort"], capture_output=True, text=True, timeout=120)
    help_text = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in help_text, help_text[-2000:]  # absl's help exits 1
    assert help_text.startswith(f"{command}:")  # the module's docstring, not absl's bare USAGE line
    for flag in COMMANDS[command]:
        assert f"  {flag}:" in help_text, help_text[:3000]
