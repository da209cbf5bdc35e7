"""Issue 40: a failed run ends with each failed job's own sentence (the Snakefile's onerror,
lmstudy.errors.failed_jobs_sentences), not only Snakemake's "At least one job did not complete"."""

from __future__ import annotations

import shutil

from lmstudy.errors import failed_jobs_sentences

from .conftest import FIXTURES

RUN = FIXTURES / "failed_run"


def test_the_failed_jobs_sentence_is_said_again_at_the_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job_log = tmp_path / "logs/default/ladder/tiny_ctx32_bf16-sdpa.log"
    job_log.parent.mkdir(parents=True)
    shutil.copy(RUN / "job.log", job_log)
    said = failed_jobs_sentences([str(RUN / "snakemake.log")])  # as onerror gives it: a list
    assert len(said) == 1 and said[0].startswith("ladder_rung: CUDA is not available on this machine")
    job_log.write_text("Traceback (most recent call last):\nKeyError: 'x'\n")
    assert failed_jobs_sentences([str(RUN / "snakemake.log")]) == []  # no sentence of ours: nothing


def test_many_failed_jobs_are_said_up_to_a_limit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = []
    for i in range(7):
        (tmp_path / f"{i}.log").write_text(f"something\nerror: job {i} went wrong: fix {i}.\n")
        blocks.append(f"Error in rule r{i}:\n    jobid: {i}\n    log: {i}.log (check the log)\n")
    (tmp_path / "run.log").write_text("Building DAG of jobs...\n" + "".join(blocks))
    said = failed_jobs_sentences(str(tmp_path / "run.log"), limit=5)
    assert said[:2] == ["r0: job 0 went wrong: fix 0.", "r1: job 1 went wrong: fix 1."]
    assert len(said) == 6 and said[-1] == "and 2 more (their logs say which)"
