#!/usr/bin/env python3
"""Checks that the README's first command reuses the build of its test command.

`cargo test --workspace` (README, .ci/run) resolves features over the whole workspace, its test
crates and dev-dependencies included; `cargo run -p ksm-adapter` resolves them over the host
alone. Where a dependency ends up with other features (or another profile), the second command
builds it again, and everything above it: once, that was wasmtime and cranelift, more than 7
minutes on 2 cores before the first line of `render` (issue 39).

This compares the two commands' compilation plans (`--unit-graph`: no build, a few seconds):
every unit `cargo run -p ksm-adapter` compiles must be one `cargo test --workspace` compiled,
with the same features and profile. Fails naming the crates that differ, with the features each
command gives them. The fix is in host/Cargo.toml (the dependencies that only unify features).

`--unit-graph` is unstable: RUSTC_BOOTSTRAP=1 lets this stable cargo print it; nothing is built.
Extra arguments go to both cargo commands (e.g. --locked, --offline).
"""

import json
import os
import subprocess
import sys

# What `cargo run -p ksm-adapter` builds (the binary, so the library), as `cargo build -p ksm-adapter`
# (the plugins' check.sh) does. `cargo run` itself panics on --unit-graph (cargo 1.95).
RUN = ["build", "-p", "ksm-adapter"]
TEST = ["test", "--workspace"]


def unit_graph(args, extra):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    cmd = ["cargo", *args, "--unit-graph", "-Z", "unstable-options", *extra]
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit(f"same-features: {' '.join(cmd)} failed ({done.returncode})")
    out = done.stdout
    graph = json.loads(out)
    if graph.get("version") != 1:
        sys.exit(f"same-features: unknown --unit-graph version {graph.get('version')} from {' '.join(cmd)}")
    return graph["units"]


def key(unit):
    """What makes two units the same compilation (cargo ignores the profile's name)."""
    profile = {k: v for k, v in unit["profile"].items() if k != "name"}
    target = unit["target"]
    return (
        unit["pkg_id"],
        target["name"],
        tuple(target["kind"]),
        unit["mode"],
        tuple(unit["features"]),
        unit.get("platform"),
        json.dumps(profile, sort_keys=True),
    )


def crate(unit):
    """`name@version` of a unit's package (pkg_id is `source#name@version` or `...#version`)."""
    pkg_id = unit["pkg_id"]
    tail = pkg_id.rsplit("#", 1)[-1]
    if "@" in tail:
        return tail
    return f"{pkg_id.rsplit('/', 1)[-1].split('#')[0]}@{tail}"


def main():
    extra = sys.argv[1:]
    run, test = unit_graph(RUN, extra), unit_graph(TEST, extra)
    built = {key(u) for u in test}

    # The units the second command would compile: those not built by the first, and those above them.
    memo = {}

    def rebuilt(i):
        if i not in memo:
            memo[i] = False  # no cycles in a unit graph; guards the recursion anyway
            memo[i] = key(run[i]) not in built or any(rebuilt(d["index"]) for d in run[i]["dependencies"])
        return memo[i]

    causes = [u for u in run if key(u) not in built]
    total = sum(rebuilt(i) for i in range(len(run)))
    if not causes:
        print(f"same-features: all {len(run)} units of `cargo run -p ksm-adapter` are built by `cargo test --workspace`")
        return 0

    print(
        f"same-features: `cargo run -p ksm-adapter` after `cargo test --workspace` would compile {total} of its "
        f"{len(run)} units again, because these differ (features: declare them in host/Cargo.toml; profiles: Cargo.toml):",
        file=sys.stderr,
    )
    shown = set()
    for u in causes:
        k = key(u)
        what = (crate(u), u["target"]["name"], u["mode"], k[4], k[6])
        if what in shown:
            continue
        shown.add(what)
        print(f"  {crate(u)} ({u['target']['name']}, {u['mode']}): features [{','.join(u['features'])}]", file=sys.stderr)
        same = [t for t in test if key(t)[:4] == k[:4]]
        for t in {key(t): t for t in same}.values():
            if key(t) == k:
                continue
            if tuple(t["features"]) != k[4]:
                print(f"      cargo test --workspace has [{','.join(t['features'])}]", file=sys.stderr)
            elif key(t)[6] != k[6]:
                ours, theirs = json.loads(k[6]), json.loads(key(t)[6])
                diff = ", ".join(f"{f} {theirs[f]} vs {ours[f]}" for f in ours if ours[f] != theirs.get(f))
                print(f"      profile differs (cargo test --workspace vs cargo run): {diff}", file=sys.stderr)
        if not same:
            print("      not built by cargo test --workspace", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
