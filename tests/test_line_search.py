"""A run of lines is found in a blob's bytes exactly where it is found in the blob's lines.

``Files.holds`` answers on the bytes (no split of a big file into lines), so it must agree with
``find_run`` over ``split_lines`` on everything a file can hold: trailing whitespace of every
kind (``\\r``, form feeds, a no-break space), blank lines around the run, no final line end,
bytes that are not UTF-8, a run that starts at the first line or ends at the last.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from gitrepo import GitRepo

from ggstack import git
from ggstack.check.files import Files, find_run, pmap_of, run_in_bytes, split_lines

BLOBS = [
    b"",
    b"\n",
    b"a\n",
    b"a",
    b"a \nb\t\n",
    b"\n\na\n\nb\n\n",
    b"x\r\na\r\nb\r\n",
    b"a\x0c\n b\nb \xc2\xa0\n",
    b"caf\xc3\xa9\na\nb",
    b"bad \xc3 byte\na\n\xc3\n",
    b"ab\na\nab\nb\n",
    b"  a\na  \n\n\nb\n",
]
RUNS = [
    ["a"],
    ["a "],
    ["b"],
    ["a", "b"],
    ["a", "", "b"],
    ["", "a"],
    ["", ""],
    ["a", "b", ""],
    ["caf\xe9"],
    ["bad \udcc3 byte"],
    ["\udcc3"],
    ["ab", "b"],
    ["  a", "a"],
    ["x", "a"],
]


def test_a_run_is_found_in_the_bytes_where_it_is_found_in_the_lines(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    repo = git.Repository(str(fork.path))
    files = Files(repo)
    blobs = [repo.hash_blob(data) for data in BLOBS]
    answered = 0
    for (data, blob), run, strip in itertools.product(zip(BLOBS, blobs, strict=True), RUNS, (False, True)):
        expected = find_run(split_lines(data), run, strip=strip) is not None
        assert files.holds(blob, run, strip=strip) is expected, (data, run, strip)
        on_bytes = run_in_bytes(data, run, strip=strip)
        assert on_bytes is None or on_bytes is expected, (data, run, strip)
        answered += on_bytes is not None
    # Only runs of blank lines are left to the lines; everything else is answered on the bytes.
    blank_only = sum(not any(s.strip() for s in run) for run in RUNS)
    assert answered == len(BLOBS) * 2 * (len(RUNS) - blank_only)
    assert files.holds(blobs[4], ["a", "b"], strip=True) and not files.holds(blobs[4], ["a", "b"], strip=False)
    assert not files.holds(repo.null_oid, ["a"], strip=True) and not files.holds(blobs[2], [], strip=False)


def test_an_alignment_numbers_lines_in_order_past_any_length_asked_before() -> None:
    short = pmap_of("@@ -2 +2,2 @@\n-b\n+x\n+y\n", 4)
    assert short == [0, None, 3, 4]
    n = 300_000  # longer than any alignment made so far: the shared numbers grow
    assert pmap_of("", n) == list(range(n))
    assert pmap_of("@@ -0,0 +1,3 @@\n+a\n+b\n+c\n", n)[-1] == n + 2
    assert short == [0, None, 3, 4]  # an alignment made before is not changed by one made later


def test_stripped_lines_are_the_lines_less_trailing_whitespace_kept_once_where_they_are_the_same(
    tmp_path: Path,
) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    repo = git.Repository(str(fork.path))
    clean, spaced = repo.hash_blob(b"one\ntwo\n"), repo.hash_blob(b"one  \ntwo\t\nthree\n")
    files = Files(repo)
    assert files.stripped_lines(clean) == ["one", "two"] == files.lines(clean)
    assert files.stripped_lines(spaced) == ["one", "two", "three"]
    assert files.lines(spaced) == ["one  ", "two\t", "three"]
    assert files.stripped(spaced) == {"one", "two", "three"}


def test_a_blob_is_counted_on_its_bytes_and_split_only_when_a_line_is_read(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    repo = git.Repository(str(fork.path))
    files = Files(repo)
    for data in BLOBS:
        blob = repo.hash_blob(data)
        assert files.count_lines(blob) == len(split_lines(data)), data
        later = files.lines_when_read(blob)
        assert len(later) == len(split_lines(data)) and blob not in files._lines  # counted, not split
        assert list(later) == split_lines(data) and later[-1:] == split_lines(data)[-1:]
    assert files.count_lines(repo.null_oid) == 0 and len(files.lines_when_read(None)) == 0


def test_one_line_asked_often_of_a_blob_is_answered_by_its_set_as_by_its_bytes(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    repo = git.Repository(str(fork.path))
    ones = [run for run in RUNS if len(run) == 1] + [[""], ["b\t"], ["\xa0"]]
    for data in BLOBS:
        blob = repo.hash_blob(data)
        files = Files(repo)
        expected = [find_run(split_lines(data), run, strip=True) is not None for run in ones]
        for _ in range(3):  # on the bytes first, then (asked often enough) on the set of its lines
            assert [files.holds(blob, run, strip=True) for run in ones * 3] == expected * 3, data
        assert blob in files._stripped


def test_a_few_lines_of_a_blob_are_its_lines_there_whether_it_was_split_or_not(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    repo = git.Repository(str(fork.path))
    for data in BLOBS:
        blob, n = repo.hash_blob(data), len(split_lines(data))
        for start, stop in itertools.product(range(n + 2), repeat=2):
            files = Files(repo)
            assert files.line_slice(blob, start, stop) == split_lines(data)[start:stop], (data, start, stop)
            assert blob not in files._lines  # the first ask reads as far as it goes: no split
            assert files.line_slice(blob, start, stop) == split_lines(data)[start:stop], (data, start, stop)
            assert blob in files._lines or not data  # asked again: split whole, once
