"""A degraded mirror (a partial clone, a blob lost) costs only the signals that need the object.

Class (a mirror missing one blob): ``check`` stopped with exit 3 (``git merge-tree … unable to
read …``) and no verdict for any patch. Now the patch whose merge needs the blob is judged
without the replay, its content where it can be compared, and the Run says which signal could
not be computed; every other patch is judged as ever, and the exit code is the verdicts'.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gitrepo import GitRepo, run_ggstack

LINES = "".join(f"line {i}\n" for i in range(1, 31))
OTHER = "".join(f"other {i}\n" for i in range(1, 31))


def _mirror_missing_a_blob(tmp: Path) -> GitRepo:
    """main renamed other.txt (and changed it); the fork fixed other.txt, then f.txt; the blob of
    main's other2.txt is gone from this clone."""
    r = GitRepo.init(tmp / "fork")
    r.commit("root", {"f.txt": LINES, "other.txt": OTHER})
    r.git("branch", "fork")
    r.commit("upstream change", {"f.txt": LINES.replace("line 5\n", "line five\n")})
    r.commit("rename other", {"other.txt": None, "other2.txt": OTHER + "more\n"})
    r.git("checkout", "-q", "fork")
    r.commit("fork fix other", {"other.txt": OTHER.replace("other 3\n", "other three\n")})
    r.commit("fork fix f", {"f.txt": LINES.replace("line 20\n", "line twenty\n")})
    r.git("checkout", "-q", "main")
    blob = r.git("rev-parse", "main:other2.txt").strip()
    os.remove(r.path / ".git" / "objects" / blob[:2] / blob[2:])
    return r


def test_check_judges_every_patch_of_a_mirror_missing_one_blob(tmp_path: Path) -> None:
    r = _mirror_missing_a_blob(tmp_path)
    patches = str(tmp_path / "patches")
    for args in (("init", "s", "--repo-slug", "o/r", "--base", "main"), ("import", "s", "main..fork")):
        assert run_ggstack("--patches", patches, *args, cwd=r.path).returncode == 0
    proc = run_ggstack("--patches", patches, "check", "s", "--json", cwd=r.path)
    assert proc.returncode in (0, 1), proc.stderr
    other, f = json.loads(proc.stdout)["patches"]
    assert f["verdict"] == "unique" and f["recommendation"] == "open PR"
    assert other["verdict"] == "inconclusive" and other["recommendation"] == "hold"
    said = {e["kind"]: e for e in other["evidence"]}
    assert said["empty"]["computed"] is False and "unable to read" in said["empty"]["detail"]
    assert said["content"]["uncomputed"] == ["other.txt"]

    one_by_one = run_ggstack("check", "--onto", "main", "--json", "--commits", "fork~1", "fork", cwd=r.path)
    assert one_by_one.returncode in (0, 1), one_by_one.stderr
    verdicts = [p["verdict"] for p in json.loads(one_by_one.stdout)["patches"]]
    assert verdicts == ["inconclusive", "unique"]
