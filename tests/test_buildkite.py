"""``ggstack test --matrix --ci buildkite``: the test shards as a Buildkite pipeline.

The pipeline it emits, and the fork's example ``.buildkite/pipeline.yml``, are
validated against Buildkite's published pipeline schema (vendored in
``tests/buildkite/``, its source and license there). Then the emitted steps are
run as an agent would run them — each command in a shell, ``$$`` unescaped as
the upload does, artifacts kept by ``artifact_paths`` and read back by a
stand-in ``buildkite-agent artifact download`` — and the Run the merge step
leaves is compared with the one the GitHub Actions path (``--matrix``, a
``--shard`` per entry, ``--merge``) gives for the same shards.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import test_testrun as tr
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((Path(__file__).parent / "buildkite" / "pipeline-schema.json").read_text())

# A stand-in for `buildkite-agent artifact download PATTERN DEST [--step KEY]`: copies what
# the steps before left in $BK_ARTIFACTS (paths kept) into DEST.
AGENT = """\
import glob, os, shutil, sys
args = sys.argv[1:]
assert args[:2] == ["artifact", "download"], args
pattern, dest = args[2], args[3]
store = os.environ["BK_ARTIFACTS"]
found = glob.glob(os.path.join(store, pattern))
if not found:
    sys.exit("no artifacts match " + pattern)
for path in found:
    target = os.path.join(dest, os.path.relpath(path, store))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy(path, target)
"""
# A machine with a GPU, as `ggstack test` asks one: nvidia-smi lists one.
NVIDIA_SMI = "#!/bin/sh\necho 'GPU 0: Stand-in GPU (UUID: GPU-0)'\n"


def _validate(pipeline: dict) -> None:
    jsonschema.Draft7Validator(SCHEMA).validate(pipeline)


@pytest.fixture
def world(tmp_path: Path) -> tr.World:
    w = tr.World(tmp_path)
    w.stack("k", [w.fix, w.kernel], gpu=tr.GPU)
    toml = w.patches / "k" / "stack.toml"
    toml.write_text(
        toml.read_text().replace('gpu_runner = "gpu-h200"\n', 'gpu_runner = "gpu-h200"\ngpu_queue = "gpu-h100"\n')
    )
    return w


def _bin(tmp: Path) -> dict[str, str]:
    """PATH with the stand-in agent and nvidia-smi, and ggstack (this interpreter's)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    agent = bin_dir / "buildkite-agent"
    agent.write_text(f"#!{sys.executable}\n{AGENT}")
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    ggstack = bin_dir / "ggstack"
    ggstack.write_text(f'#!/bin/sh\nexec {sys.executable} -m ggstack "$@"\n')
    for f in (agent, smi, ggstack):
        f.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _emit(w: tr.World, *args: str) -> dict:
    proc = w.gg("test", "k", "--onto", "base-needed", "--matrix", "--ci", "buildkite", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _steps(pipeline: dict) -> list[dict]:
    out = []
    for step in pipeline["steps"]:
        out += step["steps"] if "group" in step else [step]
    return out


def test_the_emitted_pipeline_and_the_forks_example_validate_against_buildkites_schema(world: tr.World) -> None:
    pipeline = _emit(world)
    _validate(pipeline)
    steps = _steps(pipeline)
    shards, merge = steps[:-1], steps[-1]
    assert len(shards) == 4  # 0001 cpu, 0001 gpu, 0002 cpu, 0002 gpu
    assert [s["agents"]["queue"] for s in shards if "gpu" in s["label"]] == ["gpu-h100", "gpu-h100"]
    assert all("agents" not in s for s in shards if "cpu" in s["label"])  # the default queue
    assert all("--gpu require" in s["command"] for s in shards if "gpu" in s["label"])
    assert [s["artifact_paths"] for s in shards] == [[f"ggstack-results/{k}.json"] for k in range(1, 5)]
    assert merge["depends_on"] == [s["key"] for s in shards] and merge["allow_dependency_failure"] is True
    assert any("--merge" in c and "--bundle" in c for c in merge["command"])
    assert "ggstack-run/commits.bundle" in merge["artifact_paths"]
    assert not any("ggstack pr" in json.dumps(s) for s in steps)  # the privileged step is the fork's own
    example = yaml.safe_load((ROOT / ".buildkite" / "pipeline.yml").read_text())
    _validate(example)
    privileged = [s for s in example["steps"] if s.get("key") == "ggstack-pr"]
    assert privileged and "--bundle" in " ".join(privileged[0]["command"])
    # The schema is not a formality: it refuses what Buildkite would.
    broken = json.loads(json.dumps(pipeline))
    broken["steps"][-1]["artifacts"] = broken["steps"][-1].pop("artifact_paths")
    with pytest.raises(jsonschema.ValidationError):
        _validate(broken)


def _run_like_an_agent(pipeline: dict, w: tr.World, env: dict[str, str], store: Path) -> None:
    """Each command step in order, in the checkout, as a Buildkite agent runs it."""
    for step in _steps(pipeline):
        for leftover in ("ggstack-results", "ggstack-run"):  # every job has a checkout of its own
            shutil.rmtree(w.fork.path / leftover, ignore_errors=True)
        commands = step["command"] if isinstance(step["command"], list) else [step["command"]]
        script = "\n".join(c.replace("$$", "$") for c in commands)
        proc = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", script], cwd=w.fork.path, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, (step["label"], proc.stdout + proc.stderr)
        for pattern in step.get("artifact_paths", []):
            for path in glob.glob(str(w.fork.path / pattern)):
                target = store / os.path.relpath(path, w.fork.path)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)


def _comparable(run: dict) -> dict:
    """A Run without what differs between two runs of the same tests (time taken, read from the cache)."""
    for o in run["patches"]:
        for t in o["tests"]:
            t.pop("seconds", None)
            t.pop("cached", None)
    return run


@pytest.mark.slow
def test_a_merge_of_the_buildkite_shards_artifacts_is_the_actions_paths_run(world: tr.World, tmp_path: Path) -> None:
    w = world
    env = {**os.environ, **_bin(tmp_path), "GGSTACK_PATCHES": str(w.patches), "BK_ARTIFACTS": str(tmp_path / "store")}
    env.pop("GITHUB_TOKEN", None)
    pipeline = json.loads(
        subprocess.run(
            ["ggstack", "test", "k", "--onto", "base-needed", "--matrix", "--ci", "buildkite"],
            cwd=w.fork.path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    _validate(pipeline)
    _run_like_an_agent(pipeline, w, env, tmp_path / "store")
    buildkite = json.loads((tmp_path / "store" / "ggstack-run" / "run.json").read_text())
    assert (tmp_path / "store" / "ggstack-run" / "commits.bundle").stat().st_size > 0

    # The Actions path, as the workflow runs it on the base the first job resolved: the matrix,
    # a --shard per entry, --merge.
    base = buildkite["base"]

    def gg(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ggstack", *args], cwd=w.fork.path, env=env, capture_output=True, text=True)

    matrix = json.loads(gg("test", "k", "--onto", base, "--matrix").stdout)
    results = tmp_path / "actions"
    for e in matrix["include"]:
        gpu = ["--gpu", "require"] if e["kind"] == "gpu" else []
        k = e["shard"].split("/")[0]
        shard = gg("test", "k", "--onto", base, *gpu, "--shard", e["shard"], "--results", str(results / f"{k}.json"))
        assert shard.returncode == 0, shard.stderr
    merged = gg("test", "k", "--onto", base, "--merge", *sorted(map(str, results.glob("*.json"))), "--json")
    assert merged.returncode in (0, 1), merged.stderr
    actions = json.loads(merged.stdout)
    assert _comparable(buildkite) == _comparable(actions)
    assert buildkite["gpu"] == "present"  # the GPU shards ran on their (stand-in) GPU
    kinds = {t["kind"] for o in buildkite["patches"] for t in o["tests"]}
    assert kinds == {"cpu", "gpu"} and all(t["status"] != "not-run" for o in buildkite["patches"] for t in o["tests"])
