#!/usr/bin/env bash
# Mutation testing of the model-free modules with mutmut 3 (not run in CI; docs/testing.md has the results).
#
#   tools/mutation_test.sh                       every module below
#   tools/mutation_test.sh run_config schedules  only those (by file name, without .py)
#
# Each module is mutated in a copy of the working tree's tracked files under $MUTATION_DIR (default
# /tmp/t2t-lite-mutation/<module>), never in the checkout, and each mutant runs only the tests of that
# module that reach the mutated function (mutmut's own selection), in one process (-n 0), stopping at the
# first failure (mutmut adds -x). mutmut forks each mutant's run from a server that has imported TensorFlow
# and collected the tests but run none (process_isolation = forkserver, rather than forking the process
# that ran the whole selection first), so a mutant costs 2-4 s, not a fresh interpreter's start-up.
# Each run starts afresh (mutmut's cache would keep a survivor's verdict after a new test kills it);
# MUTATION_KEEP=1 keeps the previous results and reruns only what mutmut thinks changed.
# Survivors: `cd $MUTATION_DIR/<module> && mutmut results` lists them, `mutmut show <name>` shows one.
#
# Needs mutmut (not in the "test" extra: CI does not run this): pip install "mutmut==3.8.1".
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${MUTATION_DIR:-/tmp/t2t-lite-mutation}
CHILDREN=${MUTATION_CHILDREN:-1}

python -c "import mutmut" 2>/dev/null || pip install "mutmut==3.8.1"

# module file -> the test files (or test ids) that test it; space-separated.
declare -A TESTS=(
  [t2t_lite/training/run_config.py]="tests/test_run_config.py"
  [t2t_lite/training/evaluator.py]="tests/test_evaluator.py"
  [t2t_lite/training/checkpoints.py]="tests/test_checkpoints.py"
  [t2t_lite/training/schedules.py]="tests/test_schedules.py"
  [t2t_lite/decoding/batching.py]="tests/test_id_batching.py"
  [t2t_lite/data/shuffle.py]="tests/test_shuffle.py tests/test_shuffled_order.py"
  [t2t_lite/training/last_step.py]="tests/test_last_step.py"
  [t2t_lite/training/loop.py]="tests/test_loop.py"
)
ORDER=(run_config evaluator checkpoints schedules batching shuffle last_step loop)
selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${ORDER[@]}")

summary=()
for name in "${selected[@]}"; do
  module=""
  for key in "${!TESTS[@]}"; do
    [ "$(basename "$key" .py)" = "$name" ] && module=$key
  done
  [ -n "$module" ] || { echo "unknown module $name (one of: ${ORDER[*]})" >&2; exit 2; }
  dir=$WORK/$name
  [ "${MUTATION_KEEP:-0}" = 1 ] || rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$ROOT" && git ls-files -z | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$dir"
  {
    echo "[mutmut]"
    echo "source_paths = t2t_lite"
    echo "only_mutate = $module"
    echo "process_isolation = forkserver"
    echo "pytest_add_cli_args_test_selection ="
    for t in ${TESTS[$module]}; do echo "    $t"; done
    echo "pytest_add_cli_args ="
    printf '    %s\n' -n 0 -p no:cacheprovider
  } > "$dir/setup.cfg"
  echo "== $module: mutants run against ${TESTS[$module]}"
  (cd "$dir" && mutmut run --max-children "$CHILDREN" > mutmut-run.log 2>&1) || echo "mutmut run failed for $module: $dir/mutmut-run.log" >&2
  counts=$(cd "$dir" && mutmut results --all true 2>/dev/null | awk -F': ' '/__mutmut_/ {n[$2]++; total++}
    END {printf "%d killed of %d (%.0f %%); survived %d, no tests %d, timeout %d, not checked %d", n["killed"], total,
         total ? 100 * n["killed"] / total : 0, n["survived"], n["no tests"], n["timeout"], n["not checked"]}')
  summary+=("$module: $counts")
  echo "$module: $counts"
done
echo
printf '%s\n' "${summary[@]}"
