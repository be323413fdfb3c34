"""Shared fixtures of the integration tests: where the titan binary and the assets are, and a
helper that runs titan and returns its result."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
TOKENIZER_DIR = REPO / "assets" / "qwen3-tokenizer"
CORPUS = REPO / "assets" / "corpus" / "python_stdlib.jsonl"


# What a module- or class-scoped fixture writes (a reference run's checkpoints, a converted
# Hugging Face folder) sits in pytest's base temporary folder, which pytest empties only when the
# whole session ends: on a host with a few GiB of free disk the suite would fill it. Folders such a
# fixture made with tmp_path_factory are deleted as soon as pytest tears the fixture down; the
# value is gone by then anyway (pytest sets the fixture up again if a later test asks for it).
_SHORT_LIVED_SCOPES = ("class", "module", "package")
_fixtures_being_set_up = []
_folders_made_by = {}


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    _fixtures_being_set_up.append(fixturedef)
    try:
        return (yield)
    finally:
        _fixtures_being_set_up.pop()


def pytest_fixture_post_finalizer(fixturedef, request):
    for folder in _folders_made_by.pop(fixturedef, []):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionstart(session):
    # The suite's temporary folders peak near 9 GiB (two workers' checkpoints and reference
    # runs): on a host with less free, tests fail with "No space left on device"; say so first.
    # Only the controlling process speaks (a worker's base folder does not exist yet).
    if hasattr(session.config, "workerinput"):
        return
    folder = session.config.option.basetemp or tempfile.gettempdir()
    free_gib = shutil.disk_usage(folder).free / 2**30 if os.path.isdir(folder) else None
    if free_gib is not None and free_gib < 10:
        print(f"\nwarning: {folder} has {free_gib:.1f} GiB free; the integration tests' "
              "temporary folders need about 9 GiB", file=sys.stderr)


@pytest.fixture(scope="session", autouse=True)
def _short_lived_temp_folders(tmp_path_factory):
    make_folder = tmp_path_factory.mktemp

    def mktemp(basename, numbered=True):
        folder = make_folder(basename, numbered)
        owner = _fixtures_being_set_up[-1] if _fixtures_being_set_up else None
        if owner is not None and owner.scope in _SHORT_LIVED_SCOPES:
            _folders_made_by.setdefault(owner, []).append(folder)
        return folder

    tmp_path_factory.mktemp = mktemp
    yield
    tmp_path_factory.mktemp = make_folder


def run_titan(*args, check=True, env=None, timeout=600, input=None, cwd=None, umask=None):
    """Runs `titan ARGS` (in `cwd`, under `umask` when given); with check=True a non-zero exit
    fails the test with its output."""
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [str(TITAN), *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        input=input,
        cwd=cwd,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"titan {' '.join(map(str, args))} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
        )
    return proc


def read_metrics(dump_folder):
    path = Path(dump_folder) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def titan_bin():
    assert TITAN.exists(), f"{TITAN} not built; run `make build`"
    return TITAN


@pytest.fixture(scope="session")
def tokenizer_dir():
    assert (TOKENIZER_DIR / "tokenizer.json").exists(), "run scripts/setup to copy the tokenizer"
    return TOKENIZER_DIR


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory):
    """A few hundred KB of the default corpus, as jsonl."""
    out = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[:60]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
