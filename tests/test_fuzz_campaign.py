"""The mutation-fuzzing campaign at CI size (tests/fuzz/README.md): at least 2 000 seeded mutants
of the examples, their IR, the oracle scenarios and the instance files, given to `serq check`,
`ir`, `run` (a short horizon, an arrivals cap), `oracle` and the instance commands; every outcome
is an answer (exit 0, a located refusal, a usage error, an oracle difference), never a traceback,
an internal error, a hang or an unlocated refusal. SERQ_FUZZ_MUTANTS and SERQ_FUZZ_SEED change
the size and the seed (`python3 scripts/fuzz.py` runs a campaign of any size from the shell)."""

from __future__ import annotations

import os

from fuzz.campaign import run_campaign
from fuzz.harness import BAD

MUTANTS = int(os.environ.get("SERQ_FUZZ_MUTANTS", "2500"))  # CI size: the README asks 2 000 at least
SEED = int(os.environ.get("SERQ_FUZZ_SEED", "1"))


def test_the_campaign_finds_no_crash_hang_or_unlocated_refusal(capsys):
    report = run_campaign(mutants=MUTANTS, seed=SEED)
    with capsys.disabled():
        print("\n" + report.table())
    bad = [f"{case.id} ({case.kind} of {case.seed_file}, {case.ops}): {o.command} -> {o.klass}: {o.detail[:300]}"
           for case, o in report.bad]
    assert not bad, f"{len(bad)} bad outcome(s); rerun one with `python3 scripts/fuzz.py --seed {SEED} " \
                    f"--only N --save DIR`:\n" + "\n".join(bad[:20])
    assert report.mutants >= 2000
    # every command had its share, and the answers are of every kind
    for command in ("check", "ir", "run", "oracle", "instance-check", "instance-ir", "instance-run"):
        assert sum(report.counts[command].values()) >= 50, (command, dict(report.counts[command]))
    assert all(k not in BAD for per in report.counts.values() for k in per)
    assert report.counts["check"]["ok"] > 0 and report.counts["check"]["refused"] > 0
    assert report.counts["run"]["ok"] > 0 and report.subprocess["refused"] > 0
