"""The demo fork's history as pure data, so its commit ids are the same on every machine: PR #130's DCP fix, merged,
reverted, re-applied as patch A, while ``dev/gilded-gnosis`` got it reshaped in one commit (docs/commands/demo.md).
Snapshots are ``<file>.<stage>.<ext>.txt``: none looks like a test to pytest."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources


@dataclass(frozen=True)
class DemoCommit:
    key: str  # how other entries and refs name it
    parents: tuple[str, ...]  # keys; () for the root
    message: (
        str  # full message (subject, blank line, body); "{key}" names an earlier commit's sha, as git revert writes it
    )
    author: str  # "Name <email>"
    date: str  # author and committer date
    files: dict[str, str | None] = field(
        default_factory=dict
    )  # fork path -> snapshot name; None deletes; unlisted paths inherit from the first parent


@dataclass(frozen=True)
class DemoImport:
    commit: str  # key of the commit ``ggstack import`` reads
    only: tuple[str, ...] = ()  # --only paths
    dropped: tuple[str, ...] = ()  # --dropped texts
    original_pr: str | None = None  # --original-pr


def snapshot(name: str) -> bytes:
    """The bytes of one snapshot file of this package."""
    return resources.files(__package__).joinpath(name).read_bytes()


MAINTAINER = "voipmonitor <voipmonitor@users.noreply.github.com>"
CONTRIBUTOR = "Priya Raman <priya.raman@gilded-gnosis.dev>"
INTEGRATOR = "Aiko Tanaka <aiko.tanaka@gilded-gnosis.dev>"
# Merges and reverts on the forge are committed by it, so one identity fits every commit.
COMMITTER = "GitHub <noreply@github.com>"

OP = "vllm/v1/attention/ops/dcp_alltoall.py"
OP_TESTS = "tests/distributed/test_dcp_a2a.py"
CAPTURE = "vllm/v1/graph_capture.py"
CUTLASS = "cmake/external_projects/cutlass.cmake"
MLA = "vllm/v1/attention/backends/mla/common.py"
README = "README.md"
TOPK = "vllm/v1/sample/topk_topp.py"
VERSION = "vllm/__init__.py"

_ROOT_FILES: dict[str, str | None] = {
    README: "readme.root.md.txt",
    "pyproject.toml": "pyproject.root.toml.txt",
    CUTLASS: "cutlass.root.cmake.txt",
    VERSION: "vllm_init.root.py.txt",
    "vllm/v1/__init__.py": "empty.txt",
    CAPTURE: "graph_capture.root.py.txt",
    "vllm/v1/attention/__init__.py": "empty.txt",
    "vllm/v1/attention/backends/__init__.py": "empty.txt",
    "vllm/v1/attention/backends/mla/__init__.py": "empty.txt",
    MLA: "mla_common.root.py.txt",
    "vllm/v1/attention/ops/__init__.py": "empty.txt",
    OP: "dcp_alltoall.root.py.txt",
    "vllm/v1/sample/__init__.py": "empty.txt",
    TOPK: "topk.root.py.txt",
    OP_TESTS: "tests_dcp_a2a.root.py.txt",
}

_PR130_FILES: dict[str, str | None] = {
    OP: "dcp_alltoall.fix.py.txt",
    OP_TESTS: "tests_dcp_a2a.fix.py.txt",
    CUTLASS: "cutlass.pr130.cmake.txt",
    MLA: "mla_common.pr130.py.txt",
}

HISTORY: tuple[DemoCommit, ...] = (
    DemoCommit(
        key="root",
        parents=(),
        message="Import vLLM into the Gilded Gnosis fork\n\nThe DCP packed all-to-all combine, the graph capture scope and the sampler as of the fork point.\n",
        author=MAINTAINER,
        date="2026-07-01T09:00:00+00:00",
        files=_ROOT_FILES,
    ),
    DemoCommit(
        key="work-readme",
        parents=("root",),
        message="[GG] docs: describe decode context parallelism\n",
        author=CONTRIBUTOR,
        date="2026-07-06T14:10:00+00:00",
        files={README: "readme.work1.md.txt"},
    ),
    DemoCommit(
        key="pr130",
        parents=("work-readme",),
        message=(
            "[GG] fix DCP packed A2A buffer lifetime during graph prewarm (#130)\n"
            "\n"
            "CUDA graphs of different batch sizes share one memory pool. The packed\n"
            "A2A send/recv staging buffers were allocated per call, so a buffer made\n"
            "while capturing a large batch could be recycled while a smaller one was\n"
            "captured, and two graphs' all_to_all nodes bound the same address.\n"
            "\n"
            "- Retain one exact-shape send/recv pair per (shape, device, dtype) while\n"
            "  graph capture is active, starting with the eager pre-warm run.\n"
            "- Test retention during prewarm and eager non-retention.\n"
            "- Pin CUTLASS to v4.0.0 for the sm_100 MLA decode kernel.\n"
            "- MLA: force contiguous latent inputs under DCP.\n"
        ),
        author=MAINTAINER,
        date="2026-07-18T16:45:00+00:00",
        files=_PR130_FILES,
    ),
    DemoCommit(
        key="work-topk",
        parents=("work-readme",),
        message="[GG] sampler: clamp top-k to the vocabulary size\n\nRequests may ask for more candidates than the vocabulary has; torch.topk raises then.\n",
        author=CONTRIBUTOR,
        date="2026-07-19T11:20:00+00:00",
        files={TOPK: "topk.work2.py.txt"},
    ),
    DemoCommit(
        key="merge130",
        parents=("work-topk", "pr130"),
        message="Merge pull request #130 from voipmonitor/fix/dcp-a2a-prewarm\n\n[GG] fix DCP packed A2A buffer lifetime during graph prewarm\n",
        author=MAINTAINER,
        date="2026-07-20T10:00:00+00:00",
        files=_PR130_FILES,
    ),
    DemoCommit(
        key="revert130",
        parents=("merge130",),
        message=(
            'Revert "Merge pull request #130 from voipmonitor/fix/dcp-a2a-prewarm"\n'
            "\n"
            "This reverts commit {merge130}, reversing\n"
            "changes made to {work-topk}.\n"
            "\n"
            "This reverts the Jul 20 merge of #130: the CUTLASS pin and the MLA\n"
            "workaround were not wanted. The tree is back to before #130; the DCP\n"
            "fix is to be re-applied on its own.\n"
        ),
        author=MAINTAINER,
        date="2026-07-20T18:30:00+00:00",
        files={path: _ROOT_FILES[path] for path in _PR130_FILES},
    ),
    DemoCommit(
        key="work-dcp-docs",
        parents=("revert130",),
        message="[GG] docs: how to enable DCP\n",
        author=CONTRIBUTOR,
        date="2026-07-20T19:05:00+00:00",
        files={README: "readme.work3.md.txt"},
    ),
    # The maintainer's clean reapply stack, on the base before the fix.
    DemoCommit(
        key="reapply",
        parents=("work-dcp-docs",),
        message=(
            "[GG clean] fix(dcp): preallocate packed A2A graph buffers\n"
            "\n"
            "Reapply the useful part of previous PR #130 after resetting\n"
            "dev/gilded-gnosis back before the Jul 20 merge/revert block, without\n"
            "the discarded CUTLASS pin or the old MLA .contiguous() workaround.\n"
            "\n"
            "- Preallocate/retain packed A2A send/recv graph buffers when CUDA graph\n"
            "  capture is active.\n"
            "- Add unit coverage for graph prewarm buffer retention and eager\n"
            "  non-retention behavior.\n"
        ),
        author=MAINTAINER,
        date="2026-07-20T21:00:00+00:00",
        files={OP: "dcp_alltoall.fix.py.txt", OP_TESTS: "tests_dcp_a2a.fix.py.txt"},
    ),
    DemoCommit(
        key="release-helper",
        parents=("reapply",),
        message=(
            "[GG clean] dcp: release_graph_buffers() and a strict fp32 LSE check\n"
            "\n"
            "Give the runner a way to drop the retained staging pairs, and reject a\n"
            "16-bit LSE: the combine weights exp(lse_r - lse) need fp32.\n"
        ),
        author=MAINTAINER,
        date="2026-07-21T09:30:00+00:00",
        files={OP: "dcp_alltoall.b.py.txt", OP_TESTS: "tests_dcp_a2a.b.py.txt"},
    ),
    DemoCommit(
        key="teardown-release",
        parents=("release-helper",),
        message=(
            "[GG clean] fix(dcp): free retained A2A pairs on graph pool teardown\n"
            "\n"
            "The retained pairs belong to the graphs that captured them. Register\n"
            "release_graph_buffers() as a graph pool teardown hook so that every\n"
            "re-capture does not leak one more set of staging buffers.\n"
        ),
        author=MAINTAINER,
        date="2026-07-21T10:15:00+00:00",
        files={OP: "dcp_alltoall.c.py.txt", OP_TESTS: "tests_dcp_a2a.c.py.txt"},
    ),
    # The current base: unrelated work, then the fix again, in another shape.
    DemoCommit(
        key="work-version",
        parents=("work-dcp-docs",),
        message="[GG] bump the fork version to 0.9.2+gg\n",
        author=CONTRIBUTOR,
        date="2026-07-22T08:00:00+00:00",
        files={VERSION: "vllm_init.bump.py.txt"},
    ),
    DemoCommit(
        key="consolidate",
        parents=("work-version",),
        message=(
            "[GG] consolidate DCP A2A lifecycle work\n"
            "\n"
            "One commit for the DCP all-to-all lifecycle changes that were spread\n"
            "over several branches:\n"
            "\n"
            "- Keep the packed A2A staging pairs alive while CUDA graphs are\n"
            "  captured (pre-warm run included), behind a staging pool object.\n"
            "- release_graph_buffers() to drop them.\n"
            "- Graph pool teardown hooks run newest first and can be removed.\n"
            "- Tests for buffer retention, eager non-retention and release.\n"
        ),
        author=INTEGRATOR,
        date="2026-07-23T15:40:00+00:00",
        files={
            OP: "dcp_alltoall.gilded.py.txt",
            OP_TESTS: "tests_dcp_a2a.gilded.py.txt",
            CAPTURE: "graph_capture.gilded.py.txt",
        },
    ),
    DemoCommit(
        key="work-topp",
        parents=("consolidate",),
        message="[GG] sampler: top-p filtering\n",
        author=CONTRIBUTOR,
        date="2026-07-24T12:00:00+00:00",
        files={TOPK: "topk.work5.py.txt"},
    ),
)

REFS: dict[str, str] = {
    "refs/heads/dev/gilded-gnosis": "work-topp",
    "refs/heads/dev/before": "work-dcp-docs",
    "refs/heads/gg/stack-src": "teardown-release",
    "refs/heads/fix/dcp-a2a-prewarm": "pr130",
}

IMPORTS: tuple[DemoImport, ...] = (
    DemoImport(
        commit="pr130",
        only=(OP, OP_TESTS),
        dropped=(
            f"CUTLASS version pin ({CUTLASS})",
            f"MLA .contiguous() workaround ({MLA})",
        ),
        original_pr="voipmonitor/vllm#130",
    ),
    DemoImport(commit="release-helper"),
    DemoImport(commit="teardown-release"),
)


def tree(key: str) -> dict[str, str]:
    """Fork path -> snapshot name of commit ``key``'s tree, following first parents."""
    commit = _BY_KEY[key]
    files = tree(commit.parents[0]) if commit.parents else {}
    for path, name in commit.files.items():
        if name is None:
            files.pop(path, None)
        else:
            files[path] = name
    return files


_BY_KEY = {c.key: c for c in HISTORY}
