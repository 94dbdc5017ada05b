"""Big reads answer what each item gets alone, in order: many blob pairs' line alignments
(split over two git processes side by side), many objects' contents (one request to the
persistent cat-file, bigger than a pipe holds)."""

from __future__ import annotations

from pathlib import Path

from gitrepo import GitRepo

from ggstack import git
from ggstack.check.files import Files


def test_many_pairs_aligned_in_two_halves_as_each_alone(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    repo = git.Repository(str(fork.path))
    pairs = []
    for i in range(70):
        old = "".join(f"line {k}\n" for k in range(i + 3))
        new = f"@@ -{i} +{i} @@ first\n" + old.replace("line 1\n", "changed\n") + "end\n"
        pairs.append((repo.hash_blob(old.encode()), repo.hash_blob(new.encode())))

    batch = Files(repo)
    batch.prepare_alignments(pairs)
    together = [batch.alignment(o, n) for o, n in pairs]
    alone = []
    for o, n in pairs:
        files = Files(repo)
        files.prepare_alignments([(o, n)])
        alone.append(files.alignment(o, n))

    assert together == alone
    # line 0 moved down by the new first line, line 1 changed, the rest moved down by one
    assert together[0] == [1, None, 3]
    assert together[69][:3] == [1, None, 3] and together[69][-1] == 72


def test_many_objects_read_in_one_request_bigger_than_a_pipe_in_order_missing_ones_none(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    repo = git.Repository(str(fork.path))
    blobs = [f"blob {i}\n".encode() * (i % 40 + 1) for i in range(3000)]  # names ~120 KB, contents ~3 MB
    names = repo.hash_blobs(blobs)
    names[1500] = "0" * 39 + "1"  # absent
    names[2999] = "HEAD:a.txt"

    read = repo.cat_file_batch(names)

    assert len(read) == 3000
    assert read[1500] is None
    assert read[2999] is not None and read[2999][2] == b"a\n"
    for i in (0, 1499, 1501, 2998):
        got = read[i]
        assert got is not None and got[0] == names[i] and got[1] == "blob" and got[2] == blobs[i]
    assert repo.cat_file_batch(names[:2]) == read[:2]  # the same process answers the next batch
