#!/usr/bin/env bash
# Flake hunt: runs test binaries again and again and counts, per test, how often it failed.
#
#   scripts/soak.sh [--load [HOGS]] N [BINARY...] [-- TEST-ARGS...]
#
# Builds every test binary once (`cargo test --workspace --all-features --no-run`), then
# runs each chosen binary N times, one run after another, each run exactly as `cargo test`
# runs it (the built binary, from its package's directory, with its normal test harness).
#
# BINARY names a test binary: `suite` for the root crate's tests/suite/ (its modules:
# `exclusion`, `loss`, ...), `metrics` and `loss_published_first` (binaries of their own),
# `cli:suite` for the CLI's cli/tests/suite/, `harness:harness`, and `PKG:lib`, `PKG:bin`
# for a package's unit tests (`zk-recipes:lib`, `harness:lib`, `cli:bin`). BINARY::MODULE
# runs only the tests of one module of it, by their whole names (`--exact`):
# `suite::exclusion`, `suite::fenced::stale`, `cli:suite::lock`; a module's name alone
# stands for it, as the test binary it once was: `exclusion` for `suite::exclusion`,
# `cli:lock` for `cli:suite::lock`. Default: every test binary of the workspace. `scripts/soak.sh --list` lists the binaries. Arguments after `--` go to
# every run (a test name filter, `--test-threads=1`, ...; with a MODULE, a filter adds
# tests by their whole names).
#
# Each run is bounded by SOAK_TIMEOUT (default 900s); a run that times out counts as a
# failure of its binary (`[timed out]`). Every run's output is kept in the log directory
# (SOAK_LOGS, default target/soak/<date>); the table printed at the end names, for each
# failing test, how many runs it failed in and the log of its first failure, and shows
# that failure's output. Exits 1 if anything failed.
#
# `--load` runs the tests on a busy machine: it starts HOGS CPU hogs (busy loops; one per
# core, `nproc`, without HOGS; `--load=HOGS` and SOAK_LOAD=HOGS do the same) after the
# build, keeps them for every run, and stops them when the script ends, however it ends (a
# hog also stops by itself once the script is gone, even after a SIGKILL). Each run's line
# shows the 1-minute load average at its end.
#
# This is a developer's tool: `scripts/test.sh` stays the one command that runs the suite.
set -euo pipefail
# All of it in one block, which bash reads whole before running it: a run takes long, and
# the file may change meanwhile (a checkout, an edit).
{
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# Builds once; prints one line per test binary: NAME<TAB>EXECUTABLE<TAB>PACKAGE-DIR.
build() {
    cargo test --workspace --all-features --no-run --message-format=json-render-diagnostics |
        jq -r --arg root "$root" '
            select(.reason == "compiler-artifact" and .profile.test and .executable != null)
            | (.manifest_path | rtrimstr("/Cargo.toml")) as $dir
            | (if $dir == $root then "" else ($dir | ltrimstr($root + "/")) + ":" end) as $pkg
            | (if .target.kind == ["test"] then $pkg + .target.name
               else ($pkg | if . == "" then "zk-recipes:" else . end) + .target.kind[0]
               end) as $name
            | [$name, .executable, $dir] | @tsv'
}

hogs=${SOAK_LOAD:-0}
case ${1:-} in
--load=*) hogs=${1#--load=} && shift ;;
--load)
    shift
    hogs=$(nproc)
    # Two numbers after `--load`: HOGS, then N (no test binary's name is a number).
    if [[ ${1:-} =~ ^[0-9]+$ && ${2:-} =~ ^[0-9]+$ ]]; then
        hogs=$1
        shift
    fi
    ;;
esac
[[ $hogs =~ ^[0-9]+$ ]] || usage
(($# >= 1)) || usage
if [[ $1 == --list ]]; then
    build | cut -f1 | sort
    exit 0
fi
[[ $1 =~ ^[1-9][0-9]*$ ]] || usage
runs=$1
shift
wanted=()
while (($#)) && [[ $1 != -- ]]; do
    wanted+=("$1")
    shift
done
[[ ${1:-} == -- ]] && shift
test_args=("$@")

timeout_s=${SOAK_TIMEOUT:-900}
logs=${SOAK_LOGS:-$root/target/soak/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$logs"

declare -A exe dir
names=()
while IFS=$'\t' read -r name path pkgdir; do
    exe[$name]=$path
    dir[$name]=$pkgdir
    names+=("$name")
done < <(build | sort)

# BINARY::MODULE: the binary's path and directory, and the module's tests by name.
declare -A module_tests
if ((${#wanted[@]})); then
    for i in "${!wanted[@]}"; do
        name=${wanted[i]}
        # A module named as the binary it once was: `exclusion`, `cli:lock`.
        if [[ $name != *::* && -z ${exe[$name]:-} ]]; then
            case $name in
            *:*) name=${name%%:*}:suite::${name#*:} ;;
            *) name=suite::$name ;;
            esac
            wanted[i]=$name
        fi
        binary=${name%%::*}
        [[ -n ${exe[$binary]:-} ]] || {
            echo "soak: no test binary named '$binary'; these exist: ${names[*]}" >&2
            exit 2
        }
        if [[ $name == *::* ]]; then
            exe[$name]=${exe[$binary]}
            dir[$name]=${dir[$binary]}
            module_tests[$name]=$("${exe[$binary]}" --list 2>/dev/null |
                sed -n 's/: test$//p' | awk -v m="${name#*::}::" 'index($0, m) == 1' |
                tr '\n' ' ')
            [[ -n ${module_tests[$name]} ]] || {
                echo "soak: no tests in module '${name#*::}' of '$binary'" >&2
                exit 2
            }
        fi
    done
    names=("${wanted[@]}")
fi

# CPU hogs beside the tests, bounded: stopped on any exit (the EXIT trap; Ctrl-C and a
# TERM exit through it), and each checks every few milliseconds that this script still runs.
hog_pids=()
stop_hogs() {
    ((${#hog_pids[@]})) || return 0
    kill "${hog_pids[@]}" 2>/dev/null || true
    wait "${hog_pids[@]}" 2>/dev/null || true
    hog_pids=()
}
# Ends the run under way (`timeout` passes the signal on to the test binary, whose servers
# die with it) and the hogs.
run_pid=""
stop() {
    [[ -z $run_pid ]] || kill "$run_pid" 2>/dev/null || true
    stop_hogs
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
soaker=$$
for ((h = 0; h < hogs; h++)); do
    (
        trap - EXIT INT TERM HUP
        while read -r _ _ _ parent _ <"/proc/$BASHPID/stat" && ((parent == soaker)); do
            for ((spin = 0; spin < 5000; spin++)); do :; done
        done
    ) &
    hog_pids+=($!)
done
load_note=""
((hogs == 0)) || load_note=" beside $hogs CPU hog(s) ($(nproc) cores)"

echo "soak: $runs run(s) of ${names[*]}, ${timeout_s}s each at most$load_note; logs in $logs" >&2
failed_any=0
summary=()
for name in "${names[@]}"; do
    safe=${name//:/_}
    run_args=()
    # Test names have no spaces: the list splits into words.
    # shellcheck disable=SC2206
    [[ -z ${module_tests[$name]:-} ]] || run_args=(--exact ${module_tests[$name]})
    run_args+=(${test_args[@]+"${test_args[@]}"})
    declare -A fails=() first=()
    bad_runs=0
    start=$SECONDS
    for ((i = 1; i <= runs; i++)); do
        log=$logs/$safe.$i.log
        status=0
        # In the background, so that Ctrl-C ends the script at once (a trap waits for a
        # command in the foreground); `stop` ends the run then.
        (cd "${dir[$name]}" && CARGO_MANIFEST_DIR=${dir[$name]} \
            exec timeout --kill-after=20 "$timeout_s" "${exe[$name]}" ${run_args[@]+"${run_args[@]}"}) \
            >"$log" 2>&1 &
        run_pid=$!
        wait "$run_pid" || status=$?
        run_pid=""
        failing=()
        # libtest prints `test NAME ... FAILED` for every failed test.
        while read -r test; do
            failing+=("$test")
        done < <(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | sort -u)
        if ((status == 124 || status == 137)); then
            failing+=("[timed out]")
            # Name the tests that never finished, at the end of the run's log.
            unfinished=$(comm -23 \
                <("${exe[$name]}" --list ${run_args[@]+"${run_args[@]}"} 2>/dev/null |
                    sed -n 's/: test$//p' | sort) \
                <(sed -n 's/^test \(.*\) \.\.\. [a-zA-Z]*$/\1/p' "$log" | sort))
            echo "soak: timed out after ${timeout_s}s; unfinished: ${unfinished//$'\n'/ }" >>"$log"
        elif ((status != 0 && ${#failing[@]} == 0)); then
            failing+=("[exit $status]")
        fi
        ((${#failing[@]})) && bad_runs=$((bad_runs + 1))
        for test in ${failing[@]+"${failing[@]}"}; do
            fails[$test]=$((${fails[$test]:-0} + 1))
            [[ -n ${first[$test]:-} ]] || first[$test]=$log
        done
        echo "soak: $name run $i/$runs: ${failing[*]:-ok} ($((SECONDS - start))s so far," \
            "load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
    summary+=("$(printf '%-22s %5d runs %4d failed  %6ds' "$name" "$runs" "$bad_runs" \
        $((SECONDS - start)))")
    for test in "${!fails[@]}"; do
        failed_any=1
        summary+=("$(printf '    %-60s failed %d/%d, first: %s' "$test" "${fails[$test]}" \
            "$runs" "${first[$test]}")")
    done
    for test in "${!fails[@]}"; do
        echo
        echo "==== $name: $test, first failure (${first[$test]})"
        if [[ $test == \[* ]]; then
            tail -n 40 "${first[$test]}"
        else
            # libtest's `---- NAME stdout ----` section of that test, up to the next one.
            awk -v head="---- $test stdout ----" '
                $0 == head { on = 1; print; next }
                on && (/^---- .* stdout ----$/ || /^failures:$/) { exit }
                on { print }' "${first[$test]}" | head -n 60
        fi
    done
    unset fails first
done

echo
stop_hogs
echo "soak summary ($runs run(s) each$load_note; logs in $logs):"
printf '%s\n' "${summary[@]}"
exit "$failed_any"
}
